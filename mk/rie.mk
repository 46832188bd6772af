# AWS's Lambda Runtime Interface Emulator, which the Lambda's tests run the
# compiled bootstrap under (test/testenv/rie.go): built from the
# github.com/aws/aws-lambda-runtime-interface-emulator module in a tools
# module of its own (tools/rie, about forty seconds the first time), and
# rebuilt only when that module's go.mod or go.sum changes.
RIE := $(CACHE)/bin/aws-lambda-rie

.PHONY: rie
rie: $(RIE)

$(RIE): tools/rie/go.mod tools/rie/go.sum
	@echo "building aws-lambda-rie for the Lambda tests (first time: about forty seconds)"
	cd tools/rie && CGO_ENABLED=0 $(GO) build -o $@ github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

TEST_ASSETS += $(RIE)
