//go:build tools

// The S3-compatible object store the tiered-storage tests run against: SeaweedFS's `weed`
// command, pinned by go.mod and built by scripts/test.sh (`go build -o ... github.com/seaweedfs/seaweedfs/weed`).
package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
