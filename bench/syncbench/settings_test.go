package syncbench

import "testing"

func TestParseSettings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    settings
		wantErr bool
	}{
		{name: "defaults", want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "a quick look", env: map[string]string{mbEnv: "30", filesEnv: "2000"},
			want: settings{repo: repoSpec{mib: 30, files: 2000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "another seed and link", env: map[string]string{seedEnv: "9", bandwidthEnv: " up:10M,down:50M "},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 9}, bandwidth: "up:10M,down:50M"}},
		{name: "bandwidth set to nothing skips the throttled half", env: map[string]string{bandwidthEnv: ""},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}}},
		{name: "empty sizes take the defaults", env: map[string]string{mbEnv: "", filesEnv: " "},
			want: settings{repo: repoSpec{mib: 300, files: 20000, seed: 1}, bandwidth: defaultBandwidth}},
		{name: "not a number", env: map[string]string{mbEnv: "30M"}, wantErr: true},
		{name: "too few files for run 3's edits", env: map[string]string{filesEnv: "100"}, wantErr: true},
		{name: "too many files for the size", env: map[string]string{mbEnv: "1", filesEnv: "20000"}, wantErr: true},
		{name: "negative seed", env: map[string]string{seedEnv: "-1"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSettings(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
