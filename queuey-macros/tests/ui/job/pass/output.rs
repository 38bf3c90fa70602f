// `output = Type`: the handler's result type; `()` when left out.
use std::collections::BTreeMap;

use queuey_core::{Job, Queues};
use serde::{Deserialize, Serialize};

#[derive(Queues, Debug, Clone, Copy, PartialEq, Eq)]
enum AppQueues {
    Default,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Quote {
    cents: u64,
}

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Default, output = Quote)]
struct PriceOrder;

#[derive(Job, Serialize, Deserialize)]
#[job(output = Vec<BTreeMap<String, u32>>, queue = AppQueues::Default)]
struct CountWords;

#[derive(Job, Serialize, Deserialize)]
#[job(queue = AppQueues::Default)]
struct Ping;

fn same<T: 'static>(_: std::marker::PhantomData<T>) -> std::any::TypeId {
    std::any::TypeId::of::<T>()
}

fn main() {
    use std::marker::PhantomData;
    use std::any::TypeId;
    assert_eq!(same(PhantomData::<<PriceOrder as Job>::Output>), TypeId::of::<Quote>());
    assert_eq!(
        same(PhantomData::<<CountWords as Job>::Output>),
        TypeId::of::<Vec<BTreeMap<String, u32>>>()
    );
    assert_eq!(same(PhantomData::<<Ping as Job>::Output>), TypeId::of::<()>());
}
