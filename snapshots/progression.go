package snapshots

import "sort"

// progression holds a list of integers as runs of arithmetic
// progressions. A series' stops and the hits its intervals span are
// mostly regular (every stop of one breakpoint, 1 hit each), so it keeps
// them in a few runs, and its memory stays flat however many snapshots a
// run takes; an irregular list takes a run per two numbers.
type progression struct {
	runs []progRun
	n    int
}

// progRun is count numbers from first, step apart; start is the index of
// first in the whole list.
type progRun struct{ first, step, start, count int }

// add appends v.
func (p *progression) add(v int) {
	if k := len(p.runs); k > 0 {
		r := &p.runs[k-1]
		switch {
		case r.count == 1:
			r.step, r.count = v-r.first, 2
			p.n++
			return
		case v == r.first+r.step*r.count:
			r.count++
			p.n++
			return
		}
	}
	p.runs = append(p.runs, progRun{first: v, start: p.n, count: 1})
	p.n++
}

// len returns how many numbers were added.
func (p *progression) len() int { return p.n }

// at returns the i-th number added, from 0.
func (p *progression) at(i int) int {
	k := sort.Search(len(p.runs), func(j int) bool { return p.runs[j].start > i }) - 1
	r := p.runs[k]
	return r.first + r.step*(i-r.start)
}

// sum returns the sum of the numbers added.
func (p *progression) sum() int {
	total := 0
	for _, r := range p.runs {
		total += r.count*r.first + r.step*r.count*(r.count-1)/2
	}
	return total
}
