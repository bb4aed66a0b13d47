#include "transport/shm/shm_segment.h"

#include <errno.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "support/crypto.h"

namespace kolo::shm {
namespace {

sockaddr_un abstract_address(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // sun_path[0] == 0: the abstract namespace, which has no file to clean up.
  std::memcpy(address.sun_path + 1, name.data(), std::min(name.size(), sizeof(address.sun_path) - 2));
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

// One byte of payload and room for one descriptor: the message that carries the memfd.
struct FdMessage {
  char byte = 'k';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
};

Status wait_fd(int fd, short events, const Deadline& deadline, const char* what) {
  while (true) {
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, deadline.remaining_ms(100));
    if (ready > 0) return Status();
    if (ready < 0 && errno != EINTR) return error(Code::kSystem, what, ": poll: ", std::strerror(errno));
    if (deadline.expired()) return error(Code::kTimeout, what, " timed out (KOLO_TIMEOUT)");
  }
}

}  // namespace

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, bytes_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

Mapping::~Mapping() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

Result<Mapping> map_shared_memory(int memfd, size_t bytes) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (data == MAP_FAILED) return error(Code::kSystem, "mmap of ", bytes, " B of shared memory: ", std::strerror(errno));
  return Mapping(data, bytes);
}

Result<Mapping> create_shared_memory(size_t bytes, Fd* memfd) {
  Fd fd(::memfd_create("kolo-shm", MFD_CLOEXEC));
  if (fd.get() < 0) return error(Code::kSystem, "memfd_create: ", std::strerror(errno));
  if (::fchmod(fd.get(), 0600) != 0) return error(Code::kSystem, "fchmod of the memfd: ", std::strerror(errno));
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return error(Code::kSystem, "ftruncate of the memfd to ", bytes, " B: ", std::strerror(errno));
  }
  Result<Mapping> mapping = map_shared_memory(fd.get(), bytes);
  if (!mapping.ok()) return mapping.status();
  *memfd = std::move(fd);
  return mapping;
}

Result<FdOffer> FdOffer::open() {
  FdOffer offer;
  offer.listener_ = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (offer.listener_.get() < 0) return error(Code::kSystem, "socket(AF_UNIX): ", std::strerror(errno));
  unsigned char nonce[12];
  KOLO_TRY(random_bytes(nonce, sizeof(nonce)));
  offer.name_ = "kolo-" + to_hex(nonce, sizeof(nonce));
  socklen_t length = 0;
  sockaddr_un address = abstract_address(offer.name_, &length);
  if (::bind(offer.listener_.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(offer.listener_.get(), 64) != 0) {
    return error(Code::kSystem, "listening on a Unix socket for shared memory: ", std::strerror(errno));
  }
  return offer;
}

Status FdOffer::serve(int fd, const std::vector<pid_t>& expected, const Deadline& deadline) {
  std::vector<pid_t> waiting = expected;
  while (!waiting.empty()) {
    KOLO_TRY(wait_fd(listener_.get(), POLLIN, deadline, "handing out shared memory"));
    Fd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client.get() < 0) continue;  // EAGAIN after a spurious wake-up, or the client left
    ucred cred{};
    socklen_t cred_length = sizeof(cred);
    if (::getsockopt(client.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_length) != 0) continue;
    auto it = std::find(waiting.begin(), waiting.end(), cred.pid);
    if (cred.uid != ::getuid() || it == waiting.end()) continue;  // not one of ours: no memory for it
    FdMessage message;
    cmsghdr* cmsg = CMSG_FIRSTHDR(&message.msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    if (::sendmsg(client.get(), &message.msg, MSG_NOSIGNAL) != 1) {
      return error(Code::kSystem, "handing shared memory to pid ", cred.pid, ": ", std::strerror(errno));
    }
    waiting.erase(it);
  }
  listener_ = Fd();  // nobody else may connect
  return Status();
}

Result<Fd> take_fd(const std::string& offer_name, const Deadline& deadline) {
  // The name came through the store: it must fit an abstract socket address.
  if (offer_name.empty() || offer_name.size() > sizeof(sockaddr_un::sun_path) - 2) {
    return error(Code::kInternal, "the shared-memory offer's socket name (", offer_name.size(), " B) is malformed");
  }
  Fd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return error(Code::kSystem, "socket(AF_UNIX): ", std::strerror(errno));
  socklen_t length = 0;
  sockaddr_un address = abstract_address(offer_name, &length);
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) {
    return error(Code::kSystem, "connecting to the shared-memory offer of this host's first rank: ",
                 std::strerror(errno), " (ranks in different network namespaces? set KOLO_TRANSPORTS=tcp)");
  }
  KOLO_TRY(wait_fd(sock.get(), POLLIN, deadline, "receiving shared memory"));
  FdMessage message;
  ssize_t n = ::recvmsg(sock.get(), &message.msg, MSG_CMSG_CLOEXEC);
  cmsghdr* cmsg = n == 1 ? CMSG_FIRSTHDR(&message.msg) : nullptr;
  if (cmsg == nullptr || cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS ||
      cmsg->cmsg_len != CMSG_LEN(sizeof(int))) {
    return error(Code::kSystem, "the shared-memory offer sent no descriptor");
  }
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return Fd(fd);
}

}  // namespace kolo::shm
