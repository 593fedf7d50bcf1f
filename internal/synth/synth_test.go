package synth

import (
	"strings"
	"testing"
)

func TestWorkingSet(t *testing.T) {
	ws, err := WorkingSet()
	if err != nil || ws < BeyondLLC || ws > max(BeyondLLC, maxAutoWorkingSet) {
		t.Fatalf("default: %d, %v; want %d to %d", ws, err, BeyondLLC, maxAutoWorkingSet)
	}
	t.Setenv(WorkingSetEnv, " 512 ")
	if ws, err := WorkingSet(); err != nil || ws != 512<<20 {
		t.Fatalf("%s=512: %d, %v", WorkingSetEnv, ws, err)
	}
	for _, bad := range []string{"", "0", "-1", "1.5", "1e3", "65537", "99999999999999999999"} {
		t.Setenv(WorkingSetEnv, bad)
		if ws, err := WorkingSet(); err == nil || !strings.Contains(err.Error(), WorkingSetEnv) {
			t.Errorf("%s=%q: %d, %v; want an error naming the variable", WorkingSetEnv, bad, ws, err)
		}
	}
}
