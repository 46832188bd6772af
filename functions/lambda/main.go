// Command bootstrap is runner-reaper as an AWS Lambda (provided.al2023):
// it builds the handler once per cold start and hands it to the runtime.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/runner-reaper/runner-reaper/internal/lambdafn"
	_ "github.com/runner-reaper/runner-reaper/internal/noheapprofile"
)

func main() {
	h, err := lambdafn.New(context.Background(), os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, lambdafn.ErrConfig) {
			os.Exit(2)
		}
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
