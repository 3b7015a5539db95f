package engine

import (
	"math"

	"github.com/fenecdb/fenec/server/fenecql"
)

// boxDistance is the least great-circle distance, in metres, from p to any
// point of the lon/lat box [min, max]: exact for a point, and never more
// than the distance to any point inside, so a nearest-first walk over the
// R-tree hands out documents in true distance order.
func boxDistance(p, min, max [2]float64) float64 {
	if min == max {
		return haversine(p, min)
	}
	lon, lat := p[0], p[1]
	if lon >= min[0] && lon <= max[0] {
		// Along a parallel the nearest point shares p's longitude.
		return haversine(p, [2]float64{lon, math.Max(min[1], math.Min(max[1], lat))})
	}
	return math.Min(meridianDistance(p, min[0], min[1], max[1]), meridianDistance(p, max[0], min[1], max[1]))
}

// meridianDistance is the least distance from p to the meridian segment at
// longitude m between latitudes s and n. On a meridian cos(d) is
// A·sin(φ) + B·cos(φ), which peaks at φ = atan2(A, B); the nearest point is
// that latitude clamped to the segment, or one of its ends.
func meridianDistance(p [2]float64, m, s, n float64) float64 {
	phi := p[1] * math.Pi / 180
	dl := (p[0] - m) * math.Pi / 180
	best := math.Min(haversine(p, [2]float64{m, s}), haversine(p, [2]float64{m, n}))
	peak := math.Atan2(math.Sin(phi), math.Cos(phi)*math.Cos(dl)) * 180 / math.Pi
	if peak >= -90 && peak <= 90 {
		best = math.Min(best, haversine(p, [2]float64{m, math.Max(s, math.Min(n, peak))}))
	}
	return best
}

// earthRadius is the sphere FenecQL's distance() measures on, in metres.
const earthRadius = fenecql.EarthRadius

// radiusBox is a lon/lat box holding every point within r metres of p; ok
// is false where the circle reaches a pole or the antimeridian, which the
// plan leaves to a scan.
func radiusBox(p [2]float64, r float64) ([2][2]float64, bool) {
	if r < 0 || r != r {
		return [2][2]float64{}, false
	}
	ang := r / earthRadius
	dLat := ang * 180 / math.Pi
	s, n := p[1]-dLat, p[1]+dLat
	if s <= -90 || n >= 90 || ang >= math.Pi/2 {
		return [2][2]float64{}, false
	}
	dLon := math.Asin(math.Min(1, math.Sin(ang)/math.Cos(p[1]*math.Pi/180))) * 180 / math.Pi
	w, e := p[0]-dLon, p[0]+dLon
	if w < -180 || e > 180 {
		return [2][2]float64{}, false
	}
	return [2][2]float64{{w, s}, {e, n}}, true
}

func haversine(p, q [2]float64) float64 { return fenecql.Haversine(p[0], p[1], q[0], q[1]) }
