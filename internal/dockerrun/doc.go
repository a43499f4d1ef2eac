// Package dockerrun is the Docker runtime both Docker sandboxes share: the
// executor sandbox (internal/sandbox) and the Python sandbox
// (internal/pysandbox). It holds what a security change must change in one
// place:
//
//   - Connect: a client of the environment's engine (or a given host),
//     negotiating the API version, that has answered a ping;
//   - Spec.Config: the locked-down container of one execution: no network,
//     read-only root filesystem, every capability dropped,
//     no-new-privileges, user and group 65534, no core dumps, no log kept,
//     memory (without swap), CPU and pid limits from backend.Limits, only
//     read-only private bind mounts and noexec tmpfs mounts. What differs
//     between the sandboxes (the image and command, stdin attached or an
//     exec beside a keeper, tmpfs and binds) are Spec fields;
//   - Engine: create under a random name (removed by name when creation
//     seems to fail: the engine may have made it before its answer was
//     lost), kill, one-shot stats, removal on every path (a failed one is
//     retried in the background with backoff, and at once when the engine
//     answers again), and Sweep of the containers crashed workers leaked,
//     by label;
//   - Capped: an output writer that keeps a head and counts the rest,
//     never failing, so a flood can neither block nor exhaust memory.
//
// Every container carries LabelSandbox, LabelOwner (the Engine's owner)
// and LabelDeadline (the unix time by which a live worker has removed it);
// Sweep removes those past their deadline, whichever sandbox made them.
package dockerrun
