package swl

import "testing"

func TestVersionsCompareAsNumbers(t *testing.T) {
	for version, want := range map[string][3]uint64{
		"0.10.0": {0, 10, 0}, "1.2": {1, 2, 0}, "0.5.0-rc.1": {0, 5, 0}, " 3 ": {3, 0, 0},
	} {
		if got, ok := release(version); !ok || got != want {
			t.Errorf("%q: %v %v", version, got, ok)
		}
	}
	if _, ok := release("dev"); ok {
		t.Error("dev is a release")
	}
	for _, c := range []struct {
		loaded, own string
		newer       bool
	}{
		{"0.10.0", "0.9.9", true},
		{"0.9.9", "0.10.0", false},
		{"0.4.0", "0.4.0", false},
		{"0.4.1", "0.4.0", true},
		{"1.0", "0.99.99", true},
		{"dev", "0.4.0", false},
	} {
		if isNewer(c.loaded, c.own) != c.newer {
			t.Errorf("%+v", c)
		}
	}
	if _, ok := release(LibraryVersion()); !ok {
		t.Fatalf("the library's version %q", LibraryVersion())
	}
}
