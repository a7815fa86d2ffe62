package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
)

// sourceStatus is what /status says about one source.
type sourceStatus struct {
	Name                string `json:"name"`
	Synced              bool   `json:"synced"`
	Stale               bool   `json:"stale"`
	LastError           string `json:"lastError"`
	ConsecutiveFailures int    `json:"consecutiveFailures"`
	Clusters            int    `json:"clusters"`
	Served              int    `json:"served"`
	Absent              int    `json:"absent"`
	HeldDepartures      int    `json:"heldDepartures"`
}

// statusDoc is what the scenarios read of /status.
type statusDoc struct {
	Sources   []sourceStatus `json:"sources"`
	Conflicts []struct {
		Name       string   `json:"name"`
		Sources    []string `json:"sources"`
		KeptSource string   `json:"keptSource"`
	} `json:"conflicts"`
	Unserved []struct {
		Name, Source, ID, Phase, State, Reason string
	} `json:"unserved"`
	Departed []struct {
		Name, Source, ID string
	} `json:"departed"`
	Duplicates []struct {
		Name       string `json:"name"`
		Source     string `json:"source"`
		KeptName   string `json:"keptName"`
		KeptSource string `json:"keptSource"`
		Reason     string `json:"reason"`
	} `json:"duplicates"`
	Kept []struct {
		Name, Source, Reason string
	} `json:"kept"`
	Secrets struct {
		Clashes []struct {
			Cluster string `json:"cluster"`
			Secret  string `json:"secret"`
			By      string `json:"by"`
		} `json:"clashes"`
	} `json:"secrets"`
}

// statusDoc reads our service's /status.
func (x *env) statusDoc() (*statusDoc, error) { return statusDocAt(x.apiAddr) }

// getStatus asks /status of the service whose API listens at addr, with
// the plugin token it needs there.
func getStatus(c *http.Client, addr, token string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return c.Do(req)
}

// statusDocAt reads /status of the service whose API listens at addr.
func statusDocAt(addr string) (*statusDoc, error) {
	resp, err := getStatus(http.DefaultClient, addr, pluginToken)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode /status: %w", err)
	}
	return &doc, nil
}

// status reads the sources of our service's /status.
func (x *env) status() (map[string]sourceStatus, error) {
	doc, err := x.statusDoc()
	if err != nil {
		return nil, err
	}
	out := map[string]sourceStatus{}
	for _, s := range doc.Sources {
		out[s.Name] = s
	}
	return out, nil
}

// param is what the scenarios read of one parameter set of the plugin
// answer.
type param struct {
	Name, Server, Source, Phase, State string
}

// params asks our plugin API what Argo CD asks it for the acme
// ApplicationSet, and returns the answer by cluster name.
func (x *env) params(parameters map[string]string) (map[string]param, error) {
	body, err := json.Marshal(map[string]any{"applicationSetName": "e2e", "input": map[string]any{"parameters": parameters}})
	if err != nil {
		return nil, err
	}
	var ps []param
	if err := getParams(x.apiAddr, pluginToken, body, &ps); err != nil {
		return nil, err
	}
	out := map[string]param{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out, nil
}

// getParams asks a deployment's plugin API at addr what Argo CD asks it,
// with token, and decodes the parameter sets of a 200 into params.
func getParams(addr, token string, body []byte, params any) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/getparams.execute", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("getparams: %s %s", resp.Status, b)
	}
	doc := struct {
		Output struct {
			Parameters any `json:"parameters"`
		} `json:"output"`
	}{}
	doc.Output.Parameters = params
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return fmt.Errorf("decode getparams: %w", err)
	}
	return nil
}

// metric returns the value of one sample of our service's /metrics.
func (x *env) metric(name, labels string) (float64, error) {
	resp, err := http.Get("http://" + x.apiAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer drain(resp.Body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		return 0, fmt.Errorf("no sample %s%s", name, labels)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// getOK returns nil when url answers 200.
func getOK(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer drain(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	return nil
}

// drain reads and discards a response body.
func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, r)
	_ = r.Close()
}
