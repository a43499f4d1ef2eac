// Command wmrl-worker serves wmrl's Temporal task queues.
//
// The durable orchestration (workflows, activities, task queues) is not
// built yet; until it is, the worker validates its flags and says so.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

var knownQueues = []string{"control", "rollout", "worldmodel", "sandbox", "gpu"}

func main() {
	queues := flag.String("queues", strings.Join(knownQueues, ","), "comma-separated task queues to serve")
	flag.Parse()
	for _, q := range strings.Split(*queues, ",") {
		if !isKnown(q) {
			fmt.Fprintf(os.Stderr, "wmrl-worker: --queues: unknown queue %q (known: %s)\n", q, strings.Join(knownQueues, ", "))
			os.Exit(2)
		}
	}
	fmt.Fprintln(os.Stderr, "wmrl-worker: the Temporal worker is not available in this build yet (training runs land with the orchestration work)")
	os.Exit(1)
}

func isKnown(q string) bool {
	for _, k := range knownQueues {
		if q == k {
			return true
		}
	}
	return false
}
