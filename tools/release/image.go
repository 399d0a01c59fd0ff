package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"

	"golang.org/x/mod/semver"
)

// imageName is the container image's repository; a release tags it with its version and, when
// the version is not a pre-release, latest.
const imageName = "filamq/fila"

// buildImage builds deploy/Dockerfile from root with the version stamped, and commit when it is
// not empty (a release's tagged commit: root is then at the commit before it, the same code), where
// `docker version` answers; elsewhere it says it skipped. (The tagged commit itself does not build
// inside the image before the release is pushed: its go.mod files require the version, without
// replace lines, and no proxy has it yet.)
func buildImage(root, version, commit string, snapshot bool, log io.Writer) error {
	if err := exec.Command("docker", "version").Run(); err != nil {
		fmt.Fprintf(log, "image: skipped: 'docker version' fails here (%v); deploy/deploy_test.go checks the Dockerfile's build, entrypoint and health check without it\n", err)
		return nil
	}
	args := []string{"build", "-f", "deploy/Dockerfile", "--build-arg", "VERSION=" + version, "-t", imageName + ":" + version}
	if commit != "" {
		args = append(args, "--build-arg", "COMMIT="+commit)
	}
	if !snapshot && semver.Prerelease(version) == "" {
		args = append(args, "-t", imageName+":latest")
	}
	cmd := exec.Command("docker", append(args, ".")...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker build: %w", err)
	}
	fmt.Fprintf(log, "image: %s:%s built (push it with docker push)\n", imageName, version)
	return nil
}
