package native

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/arenas"
)

// heapReader finds and reads glibc's arenas for gdb's agent. The agent
// asks once a process, over a Unix socket, where glibc's allocator is
// (a find request: mallinfo2's address as gdb resolves it, gdb's debug
// file directories), with the process's /proc/PID/mem opened by gdb;
// snapctl reads libc's symbol table and answers with arenas.Glibc, the
// one description of glibc's memory the agent reads with. At a stop
// whose heap is larger than the agent walks itself, the agent sends
// where the arenas are (arenas.Layout); snapctl reads the memory in bulk
// and walks the free lists (internal/arenas) and answers with
// mallinfo2()'s figures. Walking the lists in Python, a read
// a chunk, cost 0.55 s a stop at 200,000 free chunks; here about what
// copying the heap costs (docs/facts.md, fact 86). The socket is in
// the abstract namespace (a private directory's path can be longer than
// a socket's), named at random, and answers only processes of snapctl's
// own user. Nothing in the program is changed: the memory is only read.
type heapReader struct {
	ln   *net.UnixListener
	addr string
	wg   sync.WaitGroup
	mu   sync.Mutex
	// conns are the agent's connections, closed with the listener.
	conns map[*net.UnixConn]bool
}

// heapRequest is the agent's request: the process and either what to
// find glibc's allocator by or its layout to read; the process's memory
// file comes with the first request for a process.
type heapRequest struct {
	Pid    int           `json:"pid"`
	Find   *arenas.Query `json:"find,omitempty"`
	Layout arenas.Layout `json:"layout"`
}

// heapReply is the answer: glibc's allocator found (to a find request),
// or a reading (arenas.Result) and how long it took, or why there is
// none.
type heapReply struct {
	Glibc *arenas.Glibc `json:"glibc,omitempty"`
	*arenas.Result
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Corrupt says that the lists do not hold together (a heap the
	// program corrupted, or memory that is not a heap's).
	Corrupt bool `json:"corrupt,omitempty"`
}

// startHeapReader listens for gdb's agent.
func startHeapReader() (*heapReader, error) {
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	addr := "@snapctl-heap-" + hex.EncodeToString(id[:])
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: addr, Net: "unixpacket"})
	if err != nil {
		return nil, err
	}
	h := &heapReader{ln: ln, addr: addr, conns: map[*net.UnixConn]bool{}}
	h.wg.Add(1)
	go h.accept()
	return h, nil
}

// name is the socket's name in the abstract namespace (Python's socket
// module takes it after a NUL).
func (h *heapReader) name() string { return h.addr[1:] }

func (h *heapReader) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.AcceptUnix()
		if err != nil {
			return
		}
		if !sameUser(c) {
			c.Close()
			continue
		}
		h.mu.Lock()
		h.conns[c] = true
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.serve(c)
			h.mu.Lock()
			delete(h.conns, c)
			h.mu.Unlock()
			c.Close()
		}()
	}
}

// sameUser reports whether the process at c's other end runs as
// snapctl's user.
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	})
	return err == nil && cred != nil && int(cred.Uid) == os.Geteuid()
}

// serve answers one connection's requests, one process at a time.
func (h *heapReader) serve(c *net.UnixConn) {
	var (
		pid    int
		mem    *os.File
		src    *arenas.Process
		reader *arenas.Reader
	)
	defer func() {
		if reader != nil {
			reader.Close()
		}
		if mem != nil {
			mem.Close()
		}
	}()
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(4))
	for {
		n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return
		}
		var req heapRequest
		reply := heapReply{}
		fds := receivedFDs(oob[:oobn])
		if err := json.Unmarshal(buf[:n], &req); err != nil {
			reply.Error = "a request snapctl cannot read: " + err.Error()
		} else {
			if len(fds) > 0 || req.Pid != pid {
				if reader != nil {
					reader.Close()
					reader = nil
				}
				if mem != nil {
					mem.Close()
					mem = nil
				}
				pid = req.Pid
				if len(fds) > 0 {
					mem = os.NewFile(uintptr(fds[0]), fmt.Sprintf("/proc/%d/mem", pid))
					fds = fds[1:]
				}
				src = &arenas.Process{Pid: pid, File: mem}
				reader = arenas.NewReader(src)
			}
			reply = answer(req, src, reader)
		}
		for _, fd := range fds {
			syscall.Close(fd)
		}
		out, _ := json.Marshal(reply)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer answers req about the process src reads, with its reader.
func answer(req heapRequest, src *arenas.Process, reader *arenas.Reader) heapReply {
	var reply heapReply
	if req.Find != nil {
		g, err := arenas.Find(req.Pid, src, *req.Find)
		reply.Glibc = &g
		if err != nil {
			reply.Error = err.Error()
		}
		return reply
	}
	t0 := time.Now()
	res, err := reader.Read(req.Layout)
	reply.Seconds = time.Since(t0).Seconds()
	reply.Result = &res
	if err != nil {
		reply.Error = err.Error()
		reply.Corrupt = errors.Is(err, arenas.ErrCorrupt)
	}
	return reply
}

// receivedFDs are the descriptors an SCM_RIGHTS message carried.
func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// close stops listening and ends the connections.
func (h *heapReader) close() {
	if h == nil {
		return
	}
	h.ln.Close()
	h.mu.Lock()
	for c := range h.conns {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
