package gradeserve

import (
	"context"
	"fmt"
	"sync"

	"github.com/wmrl/wmrl/internal/backend/builtin"
	"github.com/wmrl/wmrl/internal/backend/realtasks"
	"github.com/wmrl/wmrl/internal/suite"
	"github.com/wmrl/wmrl/internal/testenv"
)

// twoSuites serves the small test suite for testenv.SuiteSeed and a small
// suite of the same shape for seed 0: the same task ids, other tasks.
type twoSuites struct{}

var suiteZero = sync.OnceValues(func() (*suite.Suite, error) {
	o := suite.DefaultOptions(0)
	o.Train, o.HeldOut = 4, 2
	o.MinRows, o.MaxRows = 150, 250
	o.MaxFeatures = 6
	o.PanelSize = 6
	return suite.Generate(context.Background(), o)
})

func (twoSuites) Suite(ctx context.Context, seed uint64) (*suite.Suite, error) {
	switch seed {
	case testenv.SuiteSeed:
		return testenv.SmallSuite()
	case 0:
		return suiteZero()
	}
	return nil, fmt.Errorf("no suite %d in tests", seed)
}

// Both task sources describe their data for request_info.
var (
	_ Describer = (*builtin.Tasks)(nil)
	_ Describer = (*realtasks.Source)(nil)
)
