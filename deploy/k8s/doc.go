// Package k8s holds wmrl's Kubernetes manifests (README.md) and, in its
// test, their check: every manifest decodes strictly into its Kubernetes
// API type, and the manifests agree with each other (Secrets, volumes,
// Services, the worker roles' queues, Temporal's probes).
package k8s
