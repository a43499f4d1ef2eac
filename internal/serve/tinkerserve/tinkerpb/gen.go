// Package tinkerpb holds the Go code of tinker.proto, the protobuf
// messages of the Tinker API's wire that the official SDK sends and reads
// (forward_backward bodies, forward_backward and sample results).
package tinkerpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative tinker.proto
