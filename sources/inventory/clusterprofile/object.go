package clusterprofile

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// The pure mapping between a Record and its ClusterProfile.

// objectName is the ClusterProfile's name: the source and the cluster's
// name for people, a hash of owner, source and identity for uniqueness.
// It is chosen when the object is created and kept through renames.
func objectName(owner string, r *inventory.Record) string {
	return sources.HashedName(r.Source+"-"+displayName(r), owner+"\x00"+r.Source+"\x00"+r.ID)
}

// identity keys a record: its source and ID.
func identity(source, id string) string { return source + "\x00" + id }

func displayName(r *inventory.Record) string {
	switch {
	case r.Rendering != nil:
		return r.Rendering.Name
	case r.Unserved != nil:
		return r.Unserved.Name
	}
	return r.ID
}

// desired is what we write of one ClusterProfile: the object without its
// status (created, or applied when it changed), and the status (applied to
// the status subresource when it changed). meta and status are their JSON,
// compared with what was written last.
type desired struct {
	name   string
	object *unstructured.Unstructured
	meta   []byte
	status []byte
	marks  marks // of the status's conditions
	// record is the digest of the record annotation (see written)
	record [sha256.Size]byte
}

// desiredObject builds the ClusterProfile of r in namespace ns, named name.
// prev holds the conditions written last, so that a condition's
// lastTransitionTime moves only when its status does.
func desiredObject(o *Options, name string, r *inventory.Record, prev *marks, now time.Time) (*desired, error) {
	rec, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode record of %s: %w", r.ID, err)
	}
	labels := map[string]any{LabelManager: Manager, LabelOwner: o.OwnerID}
	setLabel(labels, LabelSource, r.Source)
	phase := phaseOf(r)
	setLabel(labels, LabelPhase, string(phase))
	if c := r.Rendering; c != nil {
		setLabel(labels, LabelProvider, string(c.Provider))
		setLabel(labels, LabelTenant, c.Tenant)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Resource.GroupVersion().String(),
		"kind":       "ClusterProfile",
		"metadata": map[string]any{
			"name": name, "namespace": o.Namespace, "labels": labels,
			"annotations": annotationsOf(r, rec),
		},
		"spec": map[string]any{"displayName": displayName(r), "clusterManager": map[string]any{"name": Manager}},
	}}
	meta, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, fmt.Errorf("encode clusterprofile %s: %w", name, err)
	}
	st, m := statusOf(r, phase, prev, now)
	status, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encode status of clusterprofile %s: %w", name, err)
	}
	return &desired{object: obj, meta: meta, status: status, marks: m, record: sha256.Sum256(rec)}, nil
}

// statusApply is the server-side apply body of the status of the
// ClusterProfile ns/name.
func statusApply(ns, name string, status []byte) ([]byte, error) {
	body, err := json.Marshal(map[string]any{"apiVersion": Resource.GroupVersion().String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"name": name, "namespace": ns}, "status": json.RawMessage(status)})
	if err != nil {
		return nil, fmt.Errorf("encode status of clusterprofile %s: %w", name, err)
	}
	return body, nil
}

// FirstWrites returns the name of the ClusterProfile a leader with opts
// keeps for r, and the bodies of the two writes that make it when it is
// new: the object's create and the server-side apply of its status, the
// very bytes the leader sends. cmd/loadgen's apiserver ceiling sends them.
func FirstWrites(opts Options, r *inventory.Record, now time.Time) (name string, create, status []byte, err error) {
	name = objectName(opts.OwnerID, r)
	d, err := desiredObject(&opts, name, r, nil, now)
	if err != nil {
		return "", nil, nil, err
	}
	if create, err = d.object.MarshalJSON(); err != nil {
		return "", nil, nil, fmt.Errorf("encode clusterprofile %s: %w", name, err)
	}
	if status, err = statusApply(opts.Namespace, name, d.status); err != nil {
		return "", nil, nil, err
	}
	return name, create, status, nil
}

// annotationsOf is what we declare of the annotations: the record, and,
// while the cluster is not departing, an empty acknowledgement. While it
// departs the acknowledgement is left to the operator: declaring it then
// would overwrite theirs, and once they set it, it is theirs.
func annotationsOf(r *inventory.Record, rec []byte) map[string]any {
	out := map[string]any{AnnotationRecord: string(rec)}
	if !r.Departing() {
		out[AnnotationAcknowledge] = ""
	}
	return out
}

// setLabel sets a label only when its value is a valid label value: the
// record, not the label, is the truth, and an upstream value that cannot
// be a label must not fail the write.
func setLabel(labels map[string]any, key, value string) {
	if value != "" && len(validation.IsValidLabelValue(value)) == 0 {
		labels[key] = value
	}
}

// phaseOf is the record's phase: its rendering's while served, else what
// the latest listing said.
func phaseOf(r *inventory.Record) sources.Phase {
	switch {
	case r.Served && r.Rendering != nil:
		return r.Rendering.Phase.OrReady()
	case r.Unserved != nil:
		return r.Unserved.Phase
	}
	return ""
}

// condition is one status condition as written.
type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason"`
	Message            string `json:"message"`
	LastTransitionTime string `json:"lastTransitionTime"`
}

// The types of the conditions we write, in the order written.
const (
	condHealthy = iota
	condServed
	condDeparting
	condHeld
	condConflict
	condCount
)

var conditionTypes = [condCount]string{"ControlPlaneHealthy", "Served", "Departing", "Held", "Conflict"}

// mark is what the ledger remembers of one of our conditions as written:
// its status and since when, so that lastTransitionTime moves only when
// the status does. Its reason and message are made again at each save.
type mark struct {
	set, ok bool
	since   int64 // Unix seconds: lastTransitionTime has seconds only
}

// marks are the marks of an object's conditions, by condHealthy …: at
// 10,000 objects 0.3 MiB, where the conditions as written are ~13 MiB.
type marks [condCount]mark

// cond makes condition i and its mark: prev's time when prev (nil: none)
// holds the same status.
func cond(prev *marks, now time.Time, i int, ok bool, reason, message string) (condition, mark) {
	m := mark{set: true, ok: ok, since: now.Unix()}
	if prev != nil && prev[i].set && prev[i].ok == ok {
		m.since = prev[i].since
	}
	status := "False"
	if ok {
		status = "True"
	}
	at := time.Unix(m.since, 0).UTC().Format(time.RFC3339)
	return condition{Type: conditionTypes[i], Status: status, Reason: reason, Message: message, LastTransitionTime: at}, m
}

// statusOf is the ClusterProfile status of r.
func statusOf(r *inventory.Record, phase sources.Phase, prev *marks, now time.Time) (map[string]any, marks) {
	st := map[string]any{}
	var m marks
	conds := make([]condition, condCount)
	conds[condHealthy], m[condHealthy] = cond(prev, now, condHealthy, phase == sources.PhaseReady, reasonOf(phase), "phase "+string(phase))
	served, why, msg := servedOf(r)
	conds[condServed], m[condServed] = cond(prev, now, condServed, served, why, msg)
	gone := r.Departing()
	dmsg := "listed by its source"
	if gone {
		dmsg = "missing from " + strconv.Itoa(r.Missed) + " complete listing(s) of source " + r.Source + " since " + r.MissingSince.UTC().Format(time.RFC3339)
		switch {
		case r.Pinned:
			dmsg += "; due, kept served by the " + LabelPin + " label (remove it to let the cluster go)"
		case r.DryRun:
			dmsg += "; due, kept served: a dry run confirms no departure"
		case r.Waiting:
			dmsg += "; confirmed, waiting for room under departure.maxDeletions in the source's interval"
		}
	}
	conds[condDeparting], m[condDeparting] = cond(prev, now, condDeparting, gone, map[bool]string{true: "Missing", false: "Listed"}[gone], dmsg)
	held := gone && r.Held && !r.Pinned && !r.DryRun // acknowledged, and kept by a pin or a dry run
	hwhy, hmsg := "NotHeld", "no mass drop"
	switch {
	case held && r.Blocked:
		hwhy, hmsg = "Breaker", "held by the departure breaker (more departures due at once than departure.maxDeletions allows) until it is acknowledged (annotate "+AnnotationAcknowledge+"=true)"
	case held:
		hwhy, hmsg = "MassDrop", "part of a mass drop: its departure is held until it is acknowledged (annotate "+AnnotationAcknowledge+"=true) or the cluster is seen leaving"
	}
	conds[condHeld], m[condHeld] = cond(prev, now, condHeld, held, hwhy, hmsg)
	conflict, why, msg := conflictOf(r)
	conds[condConflict], m[condConflict] = cond(prev, now, condConflict, conflict, why, msg)
	st["conditions"] = conds
	c := r.Rendering
	if c == nil {
		return st, m
	}
	if c.KubernetesVersion != "" {
		st["version"] = map[string]any{"kubernetes": c.KubernetesVersion}
	}
	st["properties"] = propertiesOf(c, phase)
	cluster := map[string]any{"server": c.Server}
	if ca := c.CA.Data(); len(ca) > 0 {
		cluster["certificate-authority-data"] = ca
	}
	if c.ProxyURL != "" {
		cluster["proxy-url"] = c.ProxyURL
	}
	st["accessProviders"] = []map[string]any{{"name": Manager, "cluster": cluster}}
	return st, m
}

// The limits of a property in the ClusterProfile CRD: a property that
// would break them is left out, not the status.
const (
	maxPropertyName  = 253
	maxPropertyValue = 1024
)

// propertiesOf is what the plugin parameters carry of c, in phase, as
// properties: ours by their names, then each label and annotation by its
// parameter (metadata.labels.<key>, metadata.annotations.<key>).
func propertiesOf(c *sources.Cluster, phase sources.Phase) []map[string]any {
	var props []map[string]any
	add := func(name, value string) {
		if value != "" && len(value) <= maxPropertyValue && len(name) <= maxPropertyName {
			props = append(props, map[string]any{"name": name, "value": value})
		}
	}
	for _, p := range [][2]string{{"provider", string(c.Provider)}, {"source", c.Source}, {"region", c.Region}, {"account", c.Account},
		{"tenant", c.Tenant}, {"project", c.Project}, {"state", c.State}, {"phase", string(phase)}, {"id", c.Key()}} {
		add(p[0], p[1])
	}
	for _, meta := range []struct {
		prefix string
		kv     map[string]string
	}{{"metadata.labels.", c.Labels}, {"metadata.annotations.", c.Annotations}} {
		for _, k := range slices.Sorted(maps.Keys(meta.kv)) {
			add(meta.prefix+k, meta.kv[k])
		}
	}
	return props
}

// servedOf is the Served condition of r: whether the cluster is in the
// answer (and has a Secret), the reason and the message.
func servedOf(r *inventory.Record) (ok bool, reason, message string) {
	ct := r.Contest
	switch {
	case !r.Served && r.Unserved != nil:
		return false, "NotServed", "not served: " + firstNonEmpty(r.Unserved.Reason, "phase "+string(r.Unserved.Phase))
	case !r.Served:
		return false, "NotServed", "not served"
	case ct != nil && ct.Duplicate != nil:
		d := ct.Duplicate
		return false, "Duplicate", "not served: source " + d.KeptSource + " lists the same cluster (same " + d.Reason + ") as " +
			d.KeptName + ", and that listing is served"
	case ct != nil && !ct.Answered:
		return false, "NameConflict", "not served: its name is in a conflict (see the Conflict condition)"
	}
	return true, "Served", "in the plugin answer and the cluster Secrets"
}

// conflictOf is the Conflict condition of r: whether another cluster is
// listed under its name, as Argo CD normalizes it.
func conflictOf(r *inventory.Record) (ok bool, reason, message string) {
	if r.Contest == nil || r.Contest.Conflict == nil {
		return false, "NoConflict", "no other cluster is listed under its name"
	}
	c := r.Contest.Conflict
	also := "name " + c.Name + " listed by sources " + strings.Join(c.Sources, ", ")
	switch {
	case r.Contest.Answered:
		return true, "KeepsName", also + ": this cluster holds it and stays served"
	case c.KeptSource != "":
		return true, "NameTaken", also + ": a cluster of source " + c.KeptSource + " holds it, this one is not served"
	}
	return true, "NameUnresolved", also + ": none held it before, so none is served"
}

func reasonOf(p sources.Phase) string {
	if p == "" {
		return "Unknown"
	}
	return "Phase" + strings.ToUpper(string(p[:1])) + string(p[1:])
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// recordOf reads the record an object holds.
func recordOf(obj metav1.Object) (inventory.Record, error) {
	var r inventory.Record
	raw, ok := obj.GetAnnotations()[AnnotationRecord]
	if !ok {
		return r, fmt.Errorf("clusterprofile %s: no %s annotation", obj.GetName(), AnnotationRecord)
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("clusterprofile %s: decode record: %w", obj.GetName(), err)
	}
	r.Acknowledged = obj.GetAnnotations()[AnnotationAcknowledge] == "true"
	r.Pin = obj.GetLabels()[LabelPin] == "true"
	if r.Source == "" || r.ID == "" {
		return r, fmt.Errorf("clusterprofile %s: record has no source or id", obj.GetName())
	}
	return r, nil
}

// marksOf reads the marks of our conditions in an object's status; a
// condition that is missing or cannot be read has none.
func marksOf(obj *unstructured.Unstructured) *marks {
	var out marks
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, item := range list {
		c, ok := item.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := c["type"].(string)
		status, _ := c["status"].(string)
		raw, _ := c["lastTransitionTime"].(string)
		i := slices.Index(conditionTypes[:], typ)
		at, err := time.Parse(time.RFC3339, raw)
		if i < 0 || err != nil || status != "True" && status != "False" {
			continue
		}
		out[i] = mark{set: true, ok: status == "True", since: at.Unix()}
	}
	return &out
}
