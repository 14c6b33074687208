package docker

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSelfCandidates reads the container id from the mounts Docker makes in a container (the
// lines of a real container's mountinfo), and nothing from the host's own mounts, where the
// shm of every container is mounted under the same containers/<id>/ directory.
func TestSelfCandidates(t *testing.T) {
	const id = "7d14113765f65fa6372bf93519954bcd0e4e1bf9c5e8c968a351791589f828e2"
	const other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	inContainer := `549 64 0:52 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
550 64 254:0 /var/lib/docker/containers/` + id + `/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw
552 64 254:0 /var/lib/docker/containers/` + id + `/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw
553 64 254:0 /var/lib/docker/containers/` + id + `/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw
554 64 254:0 /srv/alfred/containers/` + other + `/x /data rw,relatime - ext4 /dev/vda rw
`
	require.Equal(t, []string{id}, selfCandidates([]byte(inContainer)))
	// A data root on its own file system: the root is relative to it.
	require.Equal(t, []string{id}, selfCandidates([]byte("1 2 8:1 /containers/"+id+"/hostname /etc/hostname rw - ext4 /dev/sdb rw\n")))
	onHost := `24 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
300 24 0:60 / /var/lib/docker/containers/` + id + `/mounts/shm rw,nosuid shared:150 - tmpfs shm rw,size=65536k
`
	require.Empty(t, selfCandidates([]byte(onHost)))
}

// TestProxyHostEntry reads where an adopted run was told its proxy is, in both spellings of an
// extra host.
func TestProxyHostEntry(t *testing.T) {
	require.Equal(t, "10.213.4.2", proxyHostEntry([]string{"other:10.0.0.1", "alfred-egress:10.213.4.2"}))
	require.Equal(t, "10.213.4.1", proxyHostEntry([]string{"alfred-egress=10.213.4.1"}))
	require.Empty(t, proxyHostEntry([]string{"other:10.0.0.1"}))
	require.Equal(t, "10.213.4.2", SelfAddress(netip.MustParsePrefix("10.213.4.0/28")).String())
}
