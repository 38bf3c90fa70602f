//! The broker addresses a backend connects to.

/// One broker address or several, for [`RabbitMqBackend::connect`](crate::RabbitMqBackend::connect).
pub trait Addresses {
    /// The addresses, in the order they are tried.
    fn into_addresses(self) -> Vec<String>;
}

impl Addresses for &str {
    fn into_addresses(self) -> Vec<String> {
        vec![self.to_owned()]
    }
}

impl Addresses for String {
    fn into_addresses(self) -> Vec<String> {
        vec![self]
    }
}

impl Addresses for &String {
    fn into_addresses(self) -> Vec<String> {
        vec![self.clone()]
    }
}

impl<S: AsRef<str>> Addresses for &[S] {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}

impl<S: AsRef<str>, const N: usize> Addresses for [S; N] {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}

impl<S: AsRef<str>> Addresses for Vec<S> {
    fn into_addresses(self) -> Vec<String> {
        self.iter().map(|s| s.as_ref().to_owned()).collect()
    }
}
