// rhea (npm, installed by .ci/setup into .venv/node) against iot-amqp, for
// tests/amqp/test_northbound.py: an independent AMQP 1.0 client, not ours nor proton's.
//
//   node rhea_client.js device PORT USER SECRET COUNT
//     sends COUNT readings (seq 0..COUNT-1) unsettled on a sender link with target
//     `telemetry`; prints `accepted <seq>` for each, exits 0 once all are accepted, 1 on any
//     other outcome or error.
//   node rhea_client.js app PORT USER SECRET SOURCE NAME COUNT
//     attaches a receiver (link name NAME, credit 10, manual accept) on SOURCE; prints
//     `attached`, then one JSON line {device_id, tenant_id, body} per message, accepting each;
//     exits 0 after COUNT.
//   node rhea_client.js queue PORT USER SECRET QUEUE COUNT
//     receives COUNT messages from `queue/QUEUE` (unsettled, credit 10), accepts each, prints
//     one JSON line {body, delivery_count}; then closes the connection and exits 0 once the
//     server answered the close (so the accepts went out before it).
//
// With RHEA_CA (a PEM file) it connects over TLS trusting that CA; with RHEA_CERT and RHEA_KEY
// too it shows that client certificate and logs in with SASL EXTERNAL (USER and SECRET `-`).
"use strict";
const fs = require("fs");
const rhea = require("rhea");

const [mode, port, username, password, ...rest] = process.argv.slice(2);
const container = rhea.create_container({ id: `rhea-${mode}` });
const fail = (why) => {
  console.error(`failed: ${why}`);
  process.exit(1);
};
setTimeout(() => fail("timed out"), 60000).unref();

container.on("connection_error", (ctx) => fail(`connection error ${JSON.stringify(ctx.connection.error)}`));
container.on("disconnected", (ctx) => fail(`disconnected ${ctx.error || ""}`));
container.on("sender_error", (ctx) => fail(`sender error ${JSON.stringify(ctx.sender.error)}`));
container.on("receiver_error", (ctx) => fail(`receiver error ${JSON.stringify(ctx.receiver.error)}`));

if (mode === "device") {
  const count = Number(rest[0]);
  let sent = 0;
  let accepted = 0;
  container.on("sendable", (ctx) => {
    while (ctx.sender.sendable() && sent < count) {
      const reading = { ts: 1700000000000 + sent, seq: sent, metrics: { t: 20.5 } };
      // a string body (an AmqpValue string): a JS object would be an AmqpValue map, refused
      ctx.sender.send({ body: JSON.stringify(reading), message_id: `m-${sent}` });
      sent += 1;
    }
  });
  container.on("accepted", (ctx) => {
    console.log(`accepted ${ctx.delivery.id}`);
    accepted += 1;
    if (accepted === count) {
      ctx.connection.close();
      process.exit(0);
    }
  });
  container.on("rejected", (ctx) => fail(`rejected ${JSON.stringify(ctx.delivery.remote_state)}`));
  container.on("released", () => fail("released"));
  container.on("connection_open", (ctx) => ctx.connection.open_sender("telemetry"));
} else if (mode === "app") {
  const [source, name, countText] = rest;
  const count = Number(countText);
  let received = 0;
  container.on("receiver_open", () => console.log("attached"));
  container.on("message", (ctx) => {
    const body = ctx.message.body;
    const bytes = body && body.content ? body.content : body; // a Data section
    const props = ctx.message.application_properties || {};
    console.log(JSON.stringify({
      device_id: props.device_id, tenant_id: props.tenant_id, body: String(bytes),
    }));
    ctx.delivery.accept();
    received += 1;
    if (received === count) {
      ctx.connection.close();
      process.exit(0);
    }
  });
  container.on("connection_open", (ctx) => {
    ctx.connection.open_receiver({
      name, source: { address: source }, credit_window: 10, autoaccept: false,
    });
  });
} else if (mode === "queue") {
  const [queue, countText] = rest;
  const count = Number(countText);
  let received = 0;
  container.on("message", (ctx) => {
    const body = ctx.message.body;
    const bytes = body && body.content ? body.content : body;
    console.log(JSON.stringify({ body: String(bytes), delivery_count: ctx.message.delivery_count || 0 }));
    ctx.delivery.accept();
    received += 1;
    if (received === count) ctx.connection.close();
  });
  container.on("connection_close", () => process.exit(0));
  container.on("connection_open", (ctx) => {
    ctx.connection.open_receiver({
      source: { address: `queue/${queue}` }, credit_window: 10, autoaccept: false,
    });
  });
} else {
  fail(`unknown mode ${mode}`);
}

const options = { host: "127.0.0.1", port: Number(port), reconnect: false };
if (username !== "-") Object.assign(options, { username, password });
if (process.env.RHEA_CA) {
  Object.assign(options, { transport: "tls", ca: fs.readFileSync(process.env.RHEA_CA) });
  if (process.env.RHEA_CERT) {
    Object.assign(options, {
      cert: fs.readFileSync(process.env.RHEA_CERT),
      key: fs.readFileSync(process.env.RHEA_KEY),
      enable_sasl_external: true,
    });
  }
}
container.connect(options);
