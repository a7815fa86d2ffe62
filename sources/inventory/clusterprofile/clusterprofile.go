// Package clusterprofile keeps the inventory's ledger in the Kubernetes
// API, so that every replica answers from the same records and a new
// leader resumes where the last one stopped.
//
// Each cluster the inventory knows is one ClusterProfile
// (multicluster.x-k8s.io/v1alpha1, the SIG-Multicluster Cluster Inventory
// API, which Argo CD, Open Cluster Management and MultiKueue read):
// spec.displayName is the cluster's name, spec.clusterManager.name and the
// label x-k8s.io/cluster-manager are "argocd-cluster-discovery", and
// status carries the Kubernetes version, the properties the plugin
// parameters carry (the labels and annotations included), the server and
// CA as an access provider, and the conditions ControlPlaneHealthy,
// Served (in the answer), Departing, Held and Conflict. The record
// the inventory resumes from is the annotation
// argocd-cluster-discovery.io/record. No object holds a credential: a
// Record holds references to credentials, never their values.
//
// The per-source records live in one ConfigMap. Objects are found by the
// owner label, so two installations in one namespace never touch each
// other's, and names hash the owner, source and cluster identity.
package clusterprofile

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Resource is the ClusterProfile resource.
var Resource = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}

// The names this package writes.
const (
	// Manager is spec.clusterManager.name and the value of LabelManager.
	Manager = "argocd-cluster-discovery"
	// LabelManager is the Cluster Inventory API's cluster-manager label.
	LabelManager = "x-k8s.io/cluster-manager"
	// LabelOwner holds the owner id of the installation that wrote the
	// object (secrets.ownerID), as on the cluster Secrets.
	LabelOwner    = "argocd-cluster-discovery.io/owner"
	LabelSource   = "argocd-cluster-discovery.io/source"
	LabelProvider = "argocd-cluster-discovery.io/provider"
	LabelTenant   = "argocd-cluster-discovery.io/tenant"
	LabelPhase    = "argocd-cluster-discovery.io/phase"
	// AnnotationRecord holds the inventory's Record as JSON.
	AnnotationRecord = "argocd-cluster-discovery.io/record"
	// AnnotationAcknowledge is the operator's: "true" acknowledges the
	// departure of a cluster whose departure is held (a mass drop). The
	// ledger resets it to "" whenever the cluster is not departing, so an
	// acknowledgement never outlives the drop it was given for.
	AnnotationAcknowledge = "argocd-cluster-discovery.io/acknowledge-departure"
	// LabelPin is the operator's, as on the cluster Secrets: "true" keeps
	// the cluster served, and the object, when its departure is due, for
	// as long as the label is there. The ledger's writes leave it alone.
	LabelPin = "argocd-cluster-discovery.io/pin"
	// SourcesKey is the key of the ConfigMap that holds the source records.
	SourcesKey = "sources.json"
	// CountsKey holds, per source, how many ClusterProfiles its records
	// are. It is written after every object of a save, so a reader whose
	// objects do not add up to it is reading a save in progress (or one
	// cut short) and waits: it never serves part of a save.
	CountsKey = "records.json"
	// SumsKey holds, per source, the sum (modulo 2^64) of its records'
	// digests (see recordSum), written with the counts: a save that only
	// changes records (a rename, a departure counted) adds up to the same
	// counts mid-way, never to the same sums. A ConfigMap without it (an
	// earlier version's) is checked by its counts only.
	SumsKey = "record-sums.json"
	// configMapPrefix starts the default name of that ConfigMap.
	configMapPrefix = "argocd-cluster-discovery-ledger-"
)

// Options locate the ledger.
type Options struct {
	// Logger gets a line for each save that wrote something (how many
	// objects of each kind, and how long each step took); nil: none.
	Logger *slog.Logger
	// Namespace holds the ClusterProfiles and the ConfigMap.
	Namespace string
	// OwnerID identifies this installation; it must not be empty.
	OwnerID string
	// ConfigMap names the ConfigMap of the source records; empty means
	// argocd-cluster-discovery-ledger-<owner id> (and a short hash), so
	// that two installations in one namespace never share one.
	ConfigMap string
	// UnsettledAfter is how long a reader with no book yet waits for the
	// ledger to add up before it is told why it does not (see
	// Unsettled): a save in progress adds up within seconds, a record
	// that cannot be read does not. Zero: DefaultUnsettledAfter.
	UnsettledAfter time.Duration
	// CatchUp is how long Current waits for the feed's last book to
	// reach the ledger's ConfigMap as the API server holds it before it
	// says the book is behind: a watch brings a save within a fraction of
	// a second. Zero: DefaultCatchUp.
	CatchUp time.Duration
}

// DefaultCatchUp is Options.CatchUp's default.
const DefaultCatchUp = time.Second

// DefaultUnsettledAfter is Options.UnsettledAfter's default.
const DefaultUnsettledAfter = 20 * time.Second

func (o *Options) validate() error {
	if o.UnsettledAfter <= 0 {
		o.UnsettledAfter = DefaultUnsettledAfter
	}
	if o.CatchUp <= 0 {
		o.CatchUp = DefaultCatchUp
	}
	if o.ConfigMap == "" {
		o.ConfigMap = sources.HashedName(configMapPrefix+o.OwnerID, o.OwnerID)
	}
	var errs []error
	if msgs := validation.IsDNS1123Label(o.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q: %v", o.Namespace, msgs))
	}
	if msgs := validation.IsValidLabelValue(o.OwnerID); o.OwnerID == "" || len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("owner id %q: must be a non-empty label value", o.OwnerID))
	}
	if msgs := validation.IsDNS1123Subdomain(o.ConfigMap); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("configMap %q: %v", o.ConfigMap, msgs))
	}
	return errors.Join(errs...)
}
