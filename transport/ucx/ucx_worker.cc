#include "transport/ucx/ucx_worker.h"

#include <cstdlib>

namespace kolo::ucx {

Status ucx_error(ucs_status_t status, const std::string& what) {
  const Code code = status == UCS_ERR_CANCELED ? Code::kAborted
                    : status == UCS_ERR_MESSAGE_TRUNCATED ? Code::kMismatch
                                                          : Code::kRemote;
  return error(code, what, ": ", ucs_status_string(status), " (UCX)");
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::create() {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucx_error(st, "ucx transport: reading UCX's configuration (UCX_* variables)");
  // Settings kolo needs unless the user sets their variables:
  // - One rail per peer (MAX_EAGER_RAILS/_RNDV_RAILS): with a connection on each interface
  //   (lo and eth0 on one host) UCX 1.13 failed healthy endpoints mid-run with "Endpoint
  //   timeout" (TCP, 3+ ranks, 4 runs in 4); with one rail none failed in 40. kolo spreads
  //   its own rings over the NICs.
  // - Non-blocking TCP connects (TCP_CONN_NB): UCX's default connects inside ucp_ep_create
  //   with a blocking connect(), which towards a host whose link is cut waits out TCP's SYN
  //   retries (about 30 s seen, up to 127 s), past every kolo deadline; non-blocking, the
  //   connect finishes in progress() and the link's own deadline ends it.
  // ucp_config_modify takes a transport's setting without its transport's prefix (CONN_NB,
  // not TCP_CONN_NB, which UCX 1.13 ignores with an "invalid configuration" warning).
  struct Setting {
    const char* variable;  // what the user would set
    const char* name;      // what ucp_config_modify takes
    const char* value;
  };
  const Setting settings[] = {{"UCX_MAX_EAGER_RAILS", "MAX_EAGER_RAILS", "1"},
                              {"UCX_MAX_RNDV_RAILS", "MAX_RNDV_RAILS", "1"},
                              {"UCX_TCP_CONN_NB", "CONN_NB", "y"}};
  for (const Setting& setting : settings) {
    if (std::getenv(setting.variable) != nullptr) continue;
    st = ucp_config_modify(config, setting.name, setting.value);
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucx_error(st, std::string("ucx transport: setting ") + setting.variable);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (st != UCS_OK) return ucx_error(st, "ucx transport: ucp_init");
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One call at a time per communicator, from whichever thread makes it.
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(w->context_, &wparams, &w->worker_);
  if (st != UCS_OK) return ucx_error(st, "ucx transport: ucp_worker_create");
  ucp_address_t* address = nullptr;
  size_t length = 0;
  st = ucp_worker_get_address(w->worker_, &address, &length);
  if (st != UCS_OK) return ucx_error(st, "ucx transport: ucp_worker_get_address");
  w->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(w->worker_, address);
  st = ucp_worker_get_efd(w->worker_, &w->efd_);
  if (st != UCS_OK) return ucx_error(st, "ucx transport: ucp_worker_get_efd");
  return w;
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

bool UcxWorker::progress() {
  // UCX's wake-up protocol: progress until idle, then arm; BUSY means events arrived
  // meanwhile, so progress again. Bounded: a busy worker is served by the next pass.
  bool did = false;
  for (int round = 0; round < 64; ++round) {
    while (ucp_worker_progress(worker_) != 0) did = true;
    if (ucp_worker_arm(worker_) != UCS_ERR_BUSY) return did;
  }
  return true;
}

void UcxWorker::signal() { (void)ucp_worker_signal(worker_); }

UcxWorker::EndpointOwner* UcxWorker::add_endpoint_owner(UcxLink* link) {
  owners_.push_back(std::make_unique<EndpointOwner>(EndpointOwner{link}));
  return owners_.back().get();
}

}  // namespace kolo::ucx
