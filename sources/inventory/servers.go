package inventory

import (
	"fmt"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// serverClaims tells which cluster serves a server, by sources.ServerKey:
// the clusters of the answer before a listing, and those that moved onto
// a server earlier in the listing. It is built on first use, which only a
// served cluster whose server changes makes: a listing with no move costs
// nothing.
type serverClaims struct {
	answer []*sources.Cluster
	by     map[string]Ref
}

// newServerClaims returns the claims of the clusters of answer.
func newServerClaims(answer []*sources.Cluster) *serverClaims {
	return &serverClaims{answer: answer}
}

// heldByAnother returns the cluster other than ref that serves server, if
// one does.
func (s *serverClaims) heldByAnother(server string, ref Ref) (Ref, bool) {
	if s.by == nil {
		s.by = make(map[string]Ref, len(s.answer))
		for _, c := range s.answer {
			s.by[sources.ServerKey(c.Server)] = Ref{Source: c.Source, ID: c.Key()}
		}
	}
	holder, ok := s.by[sources.ServerKey(server)]
	return holder, ok && holder != ref
}

// claim records that ref serves server from now on.
func (s *serverClaims) claim(server string, ref Ref) {
	if _, ok := s.heldByAnother(server, ref); !ok {
		s.by[sources.ServerKey(server)] = ref
	}
}

// serverTakenReason is the KeptReason of a served cluster whose listing
// moved it onto a server another cluster serves.
func serverTakenReason(server string, holder Ref) string {
	return fmt.Sprintf("its listing moves it onto server %s, which cluster %s of source %s serves", server, holder.ID, holder.Source)
}
