package activities

import (
	"context"
	"fmt"
)

// CalibrateAndFuseRequest runs the step's control stages in one activity:
// RecordAnchors (when Record is set), Calibrate (when Calibrate is set, in
// the modes that debias) and Fuse. One round trip instead of three.
type CalibrateAndFuseRequest struct {
	Record    *RecordAnchorsRequest `json:"record,omitempty"`
	Calibrate *CalibrateRequest     `json:"calibrate,omitempty"`
	Fuse      FuseRequest           `json:"fuse"`
}

// Validate checks each part and that all parts name the same run and step.
func (r CalibrateAndFuseRequest) Validate() error {
	if err := r.Fuse.Validate(); err != nil {
		return fmt.Errorf("fuse: %w", err)
	}
	if r.Record != nil {
		if err := r.Record.Validate(); err != nil {
			return fmt.Errorf("record anchors: %w", err)
		}
		if r.Record.RunID != r.Fuse.RunID || r.Record.Step != r.Fuse.Step {
			return fmt.Errorf("record anchors names %s step %d, fuse %s step %d", r.Record.RunID, r.Record.Step,
				r.Fuse.RunID, r.Fuse.Step)
		}
	}
	if r.Calibrate != nil {
		if err := r.Calibrate.Validate(); err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		if r.Calibrate.RunID != r.Fuse.RunID || r.Calibrate.Step != r.Fuse.Step {
			return fmt.Errorf("calibrate names %s step %d, fuse %s step %d", r.Calibrate.RunID, r.Calibrate.Step,
				r.Fuse.RunID, r.Fuse.Step)
		}
	}
	return nil
}

// CalibrateAndFuseResponse is Fuse's response and, when the request
// calibrated, the map's summary.
type CalibrateAndFuseResponse struct {
	Calibration *CalibrationSummary `json:"calibration,omitempty"`
	Fuse        FuseResponse        `json:"fuse"`
}

// CalibrateAndFuse records the step's anchor pairs, fits and stores the
// step's map and fuses the step's batch, in that order. Each part is
// idempotent and deterministic, so a retry after a failure anywhere stores
// the same rows and returns the same response. Errors are returned as the
// parts return them (not wrapped), so a part's non-retryable invalid-input
// error stays non-retryable.
func (a *Activities) CalibrateAndFuse(ctx context.Context, req CalibrateAndFuseRequest) (CalibrateAndFuseResponse, error) {
	if err := req.Validate(); err != nil {
		return CalibrateAndFuseResponse{}, invalid(err)
	}
	var res CalibrateAndFuseResponse
	if req.Record != nil {
		if _, err := a.RecordAnchors(ctx, *req.Record); err != nil {
			return res, err
		}
	}
	if req.Calibrate != nil {
		c, err := a.Calibrate(ctx, *req.Calibrate)
		if err != nil {
			return res, err
		}
		res.Calibration = &c
	}
	f, err := a.Fuse(ctx, req.Fuse)
	if err != nil {
		return CalibrateAndFuseResponse{}, err
	}
	res.Fuse = f
	return res, nil
}
