package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"path/filepath"
)

// svgEsc escapes s for SVG text.
func svgEsc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// writeDecodeSVG draws bench -model's result as a standalone SVG (no
// scripts, no external resources): per stored type and per layer kind,
// a bar of the time per step and a bar of the share of the read
// bandwidth the matrices stream at (the dashed line is 100%).
func writeDecodeSVG(w io.Writer, r *decodeResult) error {
	const (
		width            = 1100
		labelX, barX     = 16, 330
		timeW, bwX, bwW  = 260, 800, 220
		rowH, headH, gap = 24, 44, 18
	)
	panels := []struct {
		title string
		rows  []decodeGroup
	}{{"Per stored type", r.PerType}, {"Per layer kind", r.PerKind}}
	maxT := r.InputUS
	for _, p := range panels {
		for _, g := range p.rows {
			maxT = max(maxT, g.TimeUS)
		}
	}
	maxT = max(maxT, 1)
	height := 96
	for _, p := range panels {
		height += headH + rowH*len(p.rows) + gap
	}
	height += rowH + 30
	if len(r.NotLoaded) > 0 {
		height += 20
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">
<title>qgemv decode step: %s</title>
<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>
`, width, height, width, height, svgEsc(filepath.Base(r.File)), width, height)
	fmt.Fprintf(&b, `<text x="%d" y="26" font-size="17" font-weight="bold">Decode step: %s (%s, %.0f MB), batch %d, %s, %d threads</text>
`, labelX, svgEsc(filepath.Base(r.File)), svgEsc(r.FileFormat), float64(r.FileBytes)/1e6, r.Batch, svgEsc(r.Activation), r.Threads)
	fmt.Fprintf(&b, `<text x="%d" y="50">%.2f ms per step (%.1f tokens/s): %d matrices, %.1f MB at %.2f GB/s = %.1f%% of the read bandwidth (%.2f GB/s, sampled between the steps)</text>
`, labelX, r.StepMedianUS/1e3, r.TokensPerSecond, len(r.Tensors), float64(r.BytesPerStep)/1e6, r.GBps, 100*r.RatioToReadBW, r.ReadBWGBps)
	fmt.Fprintf(&b, `<text x="%d" y="72" fill="#555555">Blue: median time per step of the group's matrices. Orange: their bytes over that time as a share of the read bandwidth (dashed line: 100%%).</text>
`, labelX)
	y := 96
	row := func(label string, t float64, ratio float64, withBW bool, note string) {
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>
`, labelX, y+16, svgEsc(label))
		tw := float64(timeW) * t / maxT
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#3b6fb6"/><text x="%.1f" y="%d" fill="#333333">%.3f ms%s</text>
`, barX, y+4, tw, rowH-8, float64(barX)+tw+6, y+16, t/1e3, svgEsc(note))
		if withBW {
			bw := float64(bwW) * min(ratio, 1.25)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#e08a2c"/><text x="%.1f" y="%d" fill="#333333">%.1f%%</text>
`, bwX, y+4, bw, rowH-8, float64(bwX)+bw+6, y+16, 100*ratio)
		}
		y += rowH
	}
	for _, p := range panels {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" font-weight="bold">%s</text>
<text x="%d" y="%d" fill="#555555">time per step</text>
<text x="%d" y="%d" fill="#555555">of read bandwidth</text>
`, labelX, y+18, svgEsc(p.title), barX, y+36, bwX, y+36)
		top := y + headH
		y = top
		for _, g := range p.rows {
			row(fmt.Sprintf("%s x%d (%s %s)", g.Name, g.Count, g.Formats, g.Activation), g.TimeUS, g.RatioToReadBW, true,
				fmt.Sprintf(", %.1f MB", float64(g.BytesPerStep)/1e6))
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888888" stroke-dasharray="4 3"/>
`, bwX+bwW, top, bwX+bwW, y)
		y += gap
	}
	row("input preparation (all stages)", r.InputUS, 0, false, " (activation quantization)")
	if len(r.NotLoaded) > 0 {
		note := fmt.Sprintf("Not loaded, so not in the step: %d matrices", len(r.NotLoaded))
		if len(r.NotLoaded) == 1 {
			note = "Not loaded, so not in the step: 1 matrix"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#a03020">%s (qgemv inspect says why)</text>
`, labelX, y+18, svgEsc(note))
		y += 20
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555555">qgemv bench -model, backend %s%s</text>
</svg>
`, labelX, y+18, svgEsc(r.Backend), map[bool]string{true: ", huge pages", false: ""}[r.HugePages])
	_, err := w.Write(b.Bytes())
	return err
}
