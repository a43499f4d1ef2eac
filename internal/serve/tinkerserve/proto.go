package tinkerserve

// forwardBackwardJSON turns a protobuf forward_backward body into the JSON
// one the handler decodes.
func forwardBackwardJSON(body []byte) ([]byte, error) {
	return nil, &httpError{status: 415, field: "Content-Type", msg: "application/x-protobuf: not supported yet; send JSON"}
}
