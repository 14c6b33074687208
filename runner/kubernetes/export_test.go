package kubernetes

import "github.com/alfred-bot/alfred/runner"

// Following reports whether id's log stream is open (runner.LogFollower.Opened): the tests
// release a flood only once it is, since what the kubelet rotates away before cannot be had.
func (r *Runtime) Following(id runner.ContainerID) bool {
	v, ok := r.followers.Load(id)
	return ok && v.(*runner.LogFollower).Opened()
}
