package proxy

import "rlproxy/internal/live"

// Record makes s report every decision to rec (the admin page's live view).
// Call it before s serves requests.
func (s *Server) Record(rec *live.Recorder) { s.live = rec }
