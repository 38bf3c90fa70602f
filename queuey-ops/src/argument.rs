//! A queue's arguments as the management API shows them, next to those
//! queuey declares: whether one matches, and how the tools print one.

use queuey_rabbitmq::topology::ArgumentValue;
use serde_json::Value;

/// Whether the argument `key` the management API `found` is the `expected`
/// one.
pub(crate) fn matches(key: &str, expected: &ArgumentValue, found: Option<&Value>) -> bool {
    match (expected, found) {
        (ArgumentValue::Integer(n), Some(v)) => v.as_i64() == Some(*n),
        (ArgumentValue::Text(t), Some(Value::String(s))) => t == s,
        // Absent and `classic` are the same to the broker.
        (ArgumentValue::Text(t), None) => key == "x-queue-type" && t == "classic",
        _ => false,
    }
}

/// An argument's value as the tools print it.
pub(crate) fn show(value: &ArgumentValue) -> String {
    match value {
        ArgumentValue::Integer(n) => n.to_string(),
        ArgumentValue::Text(t) => format!("{t:?}"),
        other => format!("{other:?}"),
    }
}
