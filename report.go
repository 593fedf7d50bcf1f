package qgemv

import "github.com/qgemv/qgemv/dispatch"

// Candidate is one backend the probe knows of.
type Candidate struct {
	Name      string // the name WithBackend takes
	Available bool   // usable on this machine and compiled in
	Detail    string // features required, the device, or why it is unavailable
}

// Report describes the machine and the backend selection.
type Report struct {
	CPU        string      // brand string
	Cores      int         // physical cores
	Threads    int         // logical processors
	L3         int64       // last-level cache bytes the CPU reports (0: unknown)
	Features   string      // CPU features relevant to the kernels
	Candidates []Candidate // every backend known, best first
	Chosen     string      // the selected backend's name ("" from Probe)
	Reason     string      // why it was selected
	Notes      []string    // settings that changed the choice, or were ignored
}

func reportOf(r dispatch.Report) Report {
	out := Report{CPU: r.CPU, Cores: r.Cores, Threads: r.Threads, L3: r.L3, Features: r.Features, Chosen: r.Chosen, Reason: r.Reason, Notes: r.Notes}
	for _, c := range r.Candidates {
		out.Candidates = append(out.Candidates, Candidate(c))
	}
	return out
}

// Probe lists the backends of this machine without opening one.
func Probe() Report { return reportOf(dispatch.Probe()) }

// String formats the report for people, as dispatch.Report does.
func (r Report) String() string {
	d := dispatch.Report{CPU: r.CPU, Cores: r.Cores, Threads: r.Threads, L3: r.L3, Features: r.Features, Chosen: r.Chosen, Reason: r.Reason, Notes: r.Notes}
	for _, c := range r.Candidates {
		d.Candidates = append(d.Candidates, dispatch.Candidate(c))
	}
	return d.String()
}
