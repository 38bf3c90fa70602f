#!/usr/bin/env python3
"""A producer and a dead-letter reader written from docs/wire-format.md alone,
with the `pika` client, as a team working in Python would write them.

    pika_client.py publish URL QUEUE NAME    publish two jobs to QUEUE; print them as JSON
    pika_client.py read-dead URL QUEUE NAME  take every message of QUEUE; print them as JSON

NAME is the connection's name on the broker. `tests/interop.rs` runs both
against a queuey worker.
"""

import base64
import json
import sys
import time
import uuid

import pika


def connect(url, name):
    parameters = pika.URLParameters(url)
    parameters.client_properties = {"connection_name": name}
    return pika.BlockingConnection(parameters)


def publish(url, queue, name):
    now_ms = int(time.time() * 1000)
    accepted_id = str(uuid.uuid4())
    rejected_id = str(uuid.uuid4())
    # Written by hand, not by a library: the required fields, two optional
    # ones, and a field queuey does not know (it must be ignored).
    accepted = (
        '{"job_id":"%s","job_type":"place_order","queue":%s,"attempt":1,'
        '"enqueued_at_ms":%d,"correlation_id":"checkout-7","sent_by":"pika_client.py",'
        '"payload":{"sku":"B-1024","quantity":3}}'
    ) % (accepted_id, json.dumps(queue), now_ms)
    # Spaced and indented: a dead letter keeps the body byte for byte.
    rejected = (
        '{\n  "job_id": "%s",\n  "job_type": "place_order",\n  "queue": %s,\n'
        '  "attempt": 1,\n  "priority": 3,\n'
        '  "payload": { "sku": "DISCONTINUED-9", "quantity": 1 }\n}\n'
    ) % (rejected_id, json.dumps(queue))

    connection = connect(url, name)
    channel = connection.channel()
    # With confirms on, basic_publish raises when the broker nacks the job or
    # returns it as unroutable (mandatory).
    channel.confirm_delivery()
    channel.basic_publish(
        exchange="",
        routing_key=queue,
        body=accepted.encode("utf-8"),
        properties=pika.BasicProperties(
            delivery_mode=2, message_id=accepted_id, content_type="application/json"
        ),
        mandatory=True,
    )
    channel.basic_publish(
        exchange="",
        routing_key=queue,
        body=rejected.encode("utf-8"),
        properties=pika.BasicProperties(delivery_mode=2, message_id=rejected_id, priority=3),
        mandatory=True,
    )
    connection.close()
    print(
        json.dumps(
            {
                "accepted": {"job_id": accepted_id, "body": accepted},
                "rejected": {"job_id": rejected_id, "body": rejected},
            }
        )
    )


def header_value(value):
    if isinstance(value, bool) or not isinstance(value, (int, str, bytes)):
        return {"unexpected": repr(value)}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode("ascii")}
    return value


def read_dead(url, queue, name):
    connection = connect(url, name)
    channel = connection.channel()
    messages = []
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=False)
        if method is None:
            break
        messages.append(
            {
                "body": body.decode("utf-8"),
                "delivery_mode": properties.delivery_mode,
                "message_id": properties.message_id,
                "priority": properties.priority,
                "headers": {k: header_value(v) for k, v in (properties.headers or {}).items()},
            }
        )
        channel.basic_ack(method.delivery_tag)
    connection.close()
    print(json.dumps({"messages": messages}))


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] not in ("publish", "read-dead"):
        sys.exit(__doc__)
    command, url, queue, name = sys.argv[1:]
    (publish if command == "publish" else read_dead)(url, queue, name)
