//! Accessors of plain fields, documented where they are listed.

/// Getters of `Copy` fields: `name: Type;` is `pub fn name(&self) -> Type`,
/// the field of that name.
macro_rules! getters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $($(#[$doc])* pub fn $name(&self) -> $ty {
            self.$name
        })*
    };
}

/// Builder setters: `with_name(field: Type);` is
/// `pub fn with_name(mut self, field: Type) -> Self`, setting that field.
macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident($field:ident: $ty:ty);)*) => {
        $($(#[$doc])* pub fn $name(mut self, $field: $ty) -> Self {
            self.$field = $field;
            self
        })*
    };
}

/// `impl Trait for Arc<T>` calling the shared value's methods: each method
/// is listed by its signature alone.
macro_rules! forward_to_shared {
    (
        $(#[$attr:meta])*
        impl<$param:ident: $bound:ident + ?Sized> $trait:ident for $ty:ty {
            $(fn $name:ident $(<$lt:lifetime>)? (
                &$($self_lt:lifetime)? self $(, $arg:ident: $arg_ty:ty)* $(,)?
            ) -> $ret:ty;)*
        }
    ) => {
        $(#[$attr])*
        impl<$param: $bound + ?Sized> $trait for $ty {
            $(fn $name $(<$lt>)? (&$($self_lt)? self $(, $arg: $arg_ty)*) -> $ret {
                (**self).$name($($arg),*)
            })*
        }
    };
}

pub(crate) use {forward_to_shared, getters, setters};
