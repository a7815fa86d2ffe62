package eks

// The accounts a listing reaches: each account's role assumed once, and
// those refused left out of sight (see the package comment).

import (
	"context"
	"errors"
	"slices"

	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// assumeRoles assumes each account's role once, through the first of its
// targets, before its regions list: a denied role is one AssumeRole call
// and one error, not one of each per region racing for the credentials
// cache. Credentials still valid come from the cache, with no call. It
// returns the accounts whose role STS refused (AccessDenied: the account
// is out of sight), each logged and counted as a failure, and whether
// the listing can go on: not when a role failed otherwise (the base
// credentials expired or invalid, throttling, an outage), or when no
// account is left in sight (errs then holds the errors).
func (s *Source) assumeRoles(ctx context.Context, errs []error) (refused map[string]bool, ok bool) {
	g, gctx := errgroup.WithContext(ctx)
	seen := map[string]bool{}
	denied := make([]bool, len(s.targets))
	for i, t := range s.targets {
		if t.creds == nil || seen[t.account.ID] {
			continue
		}
		seen[t.account.ID] = true
		g.Go(func() error {
			if _, err := t.creds.Retrieve(gctx); err != nil {
				errs[i] = newError(classify(err), opAssumeRole, t.where()+": assume role "+t.account.RoleARN, err)
				if refusedRole(err) {
					denied[i] = true
					return nil // out of sight: the others go on
				}
				return errs[i]
			}
			return nil
		})
	}
	if g.Wait() != nil {
		return nil, false
	}
	refused = map[string]bool{}
	for i, t := range s.targets {
		if denied[i] {
			refused[t.account.ID] = true
		}
	}
	if len(refused) == 0 {
		return refused, true
	}
	if len(refused) == len(s.accountIDs()) {
		return nil, false // nothing in sight: the source's own credentials, most likely
	}
	for i, t := range s.targets {
		if denied[i] {
			s.metrics.Failed(errs[i])
			s.log.Warn("account out of sight: its role was refused; listing the other accounts, its clusters' departure is held",
				"account", t.account.ID, "error", errs[i].Error())
			errs[i] = nil
		}
	}
	return refused, true
}

// refusedRole reports whether an AssumeRole failed because STS refused the
// role to the caller (its trust policy, the role gone, the account
// closed), and not because of the caller's own credentials (expired,
// invalid, a bad signature: every account fails alike) or a passing
// fault.
func refusedRole(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "AccessDenied"
}

// accountIDs are the configured accounts' IDs, in the order of the
// targets.
func (s *Source) accountIDs() []string {
	var out []string
	for _, t := range s.targets {
		if !slices.Contains(out, t.account.ID) {
			out = append(out, t.account.ID)
		}
	}
	return out
}
