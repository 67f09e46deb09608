package schema

// This file: family_test.go covers it (bucket bounds, vLLM and OTel
// supersets).

// Bucket bounds (seconds unless stated). Histograms use explicit bounds on both
// outputs: Prometheus "le" buckets and OTLP ExplicitBucketHistogram, never the
// SDK defaults (which are meant for milliseconds).
var (
	// OTelTTFTAdvice is the OpenTelemetry GenAI advice for
	// gen_ai.server.time_to_first_token.
	OTelTTFTAdvice = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0}

	// OTelTPOTAdvice is the OpenTelemetry GenAI advice for
	// gen_ai.server.time_per_output_token.
	OTelTPOTAdvice = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}

	// OTelRequestDurationAdvice is the OpenTelemetry GenAI advice for
	// gen_ai.server.request.duration.
	OTelRequestDurationAdvice = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

	// TTFTBuckets are vLLM's 22 time-to-first-token bounds: the OTel advice
	// plus 20, 40, 80, 160, 640 and 2560 s.
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}

	// TokenLatencyBuckets are vLLM's 19 bounds for inter-token latency and
	// time per output token: the OTel TPOT advice plus 5 … 80 s.
	TokenLatencyBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}

	// RequestPhaseBuckets serve the request duration and its phases (queue,
	// prefill, decode). They start at 1 ms (a small model on a CPU finishes
	// phases in milliseconds; vLLM's 0.3 s floor would hide them), contain the
	// OTel request-duration advice, and double up to about 43 minutes.
	RequestPhaseBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68, 655.36, 1310.72, 2621.44}

	// StepDurationBuckets serve engine step durations: 50 µs to 5 s.
	StepDurationBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

	// LengthBuckets are 1-2-5 bounds for per-request prompt and generation
	// lengths, up to 100 000 tokens (longer contexts land in +Inf).
	LengthBuckets = Buckets125(100000)

	// MaskBuckets: a grammar's token mask per step, from 1 µs (a cached
	// mask) to 100 ms (a whole 128k vocabulary walked slowly); issue 26's
	// target is 100 µs.
	MaskBuckets = []float64{0.000001, 0.0000025, 0.000005, 0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1}

	// StepTokenBuckets serve tokens per engine step (powers of two to 4096).
	StepTokenBuckets = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}

	// BatchSizeBuckets serve requests per engine step; every size up to 8 has
	// its own bucket, then coarser up to the 64-slot maximum.
	BatchSizeBuckets = []float64{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64}
)

// Buckets125 returns the 1-2-5 series 1, 2, 5, 10, 20, 50, … up to and
// including the largest member not above max.
func Buckets125(max float64) []float64 {
	var out []float64
	for decade := 1.0; decade <= max; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * decade; v <= max {
				out = append(out, v)
			}
		}
	}
	return out
}
