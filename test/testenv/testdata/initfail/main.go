// Command initfail fails at start-up the way a Lambda custom runtime
// reports it: one POST to /runtime/init/error, then exit.
package main

import (
	"net/http"
	"os"
	"strings"
)

func main() {
	url := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/init/error"
	req, err := http.NewRequest(http.MethodPost, url,
		strings.NewReader(`{"errorMessage":"REAPER_SCOPES: required","errorType":"Runtime.ConfigError"}`))
	if err != nil {
		os.Exit(3)
	}
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.ConfigError")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		os.Exit(4)
	}
	os.Exit(2)
}
