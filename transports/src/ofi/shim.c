/* The C side of madmpi's ofi driver: libfabric's data-path calls are static inline functions
 * of its headers (they call through the objects' operation tables), so Rust cannot link to
 * them. This file opens the objects the driver needs, reads the fi_info limits into a plain
 * struct, and exports one real function per operation. It holds no state of its own and
 * makes no decision: the Rust side (mod.rs) owns buffers, credits, and errors. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <dlfcn.h>
#include <pthread.h>

/* libfabric is opened with dlopen when the driver is first used (a probe or an open), not
 * linked: loading it runs the constructors of the provider libraries it depends on (PSM's
 * sleeps for about 0.2 s), which every MPI process would otherwise pay at start-up, ofi or
 * not. The few functions libfabric exports that this file calls go through these pointers;
 * everything else is an inline call through the objects' operation tables. */
static struct fi_info *(*p_dupinfo)(const struct fi_info *info);
static int (*p_fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
static void (*p_freeinfo)(struct fi_info *info);
static int (*p_getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
			const struct fi_info *hints, struct fi_info **info);
static const char *(*p_strerror)(int errnum);
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void load_libfabric(void)
{
	void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (!h) {
		e = dlerror();
		strncpy(load_error, e ? e : "libfabric.so.1: cannot be loaded", sizeof load_error - 1);
		return;
	}
	*(void **)&p_dupinfo = dlsym(h, "fi_dupinfo");
	*(void **)&p_fabric = dlsym(h, "fi_fabric");
	*(void **)&p_freeinfo = dlsym(h, "fi_freeinfo");
	*(void **)&p_getinfo = dlsym(h, "fi_getinfo");
	*(void **)&p_strerror = dlsym(h, "fi_strerror");
	if (!p_dupinfo || !p_fabric || !p_freeinfo || !p_getinfo || !p_strerror) {
		strncpy(load_error, "libfabric.so.1 lacks fi_getinfo, fi_fabric, fi_dupinfo, "
			"fi_freeinfo or fi_strerror", sizeof load_error - 1);
		p_getinfo = NULL;
	}
}

/* 0 when libfabric is loaded; else -FI_ENOSYS, and madmpi_ofi_strerror says why. */
static int load(void)
{
	pthread_once(&load_once, load_libfabric);
	return p_getinfo ? 0 : -FI_ENOSYS;
}

#define fi_allocinfo() p_dupinfo(NULL)
#define fi_fabric p_fabric
#define fi_freeinfo p_freeinfo
#define fi_getinfo p_getinfo
#define fi_strerror p_strerror

/* Every object of one endpoint, closed together by madmpi_ofi_close. */
struct madmpi_ofi {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
};

/* What the Rust side reads from fi_info (mirrored by `Attr` in ffi.rs). */
struct madmpi_ofi_attr {
	char provider[64];
	char fabric[128];
	char domain[128];
	uint64_t caps;
	uint64_t mode;
	uint64_t mr_mode;
	uint64_t max_msg_size;
	uint64_t inject_size;
	uint64_t iov_limit;
	uint64_t rma_iov_limit;
	uint64_t tx_size;
	uint64_t rx_size;
	uint64_t mr_key_size;
};

static void copy_name(char *dst, size_t n, const char *src)
{
	if (!src)
		src = "";
	strncpy(dst, src, n - 1);
	dst[n - 1] = 0;
}

/* The first RDM endpoint fi_getinfo offers with these caps (provider `prov` when not NULL). */
static int getinfo(const char *prov, uint64_t caps, struct fi_info **out)
{
	struct fi_info *hints;
	int ret = load();

	if (ret)
		return ret;
	hints = fi_allocinfo();
	if (!hints)
		return -FI_ENOMEM;
	hints->caps = caps;
	hints->ep_attr->type = FI_EP_RDM;
	/* The driver gives every operation a struct fi_context2 of its own. */
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->av_type = FI_AV_TABLE;
	/* Packets of a peer must arrive in the order they were sent. */
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	if (prov && *prov) {
		hints->fabric_attr->prov_name = strdup(prov);
		if (!hints->fabric_attr->prov_name) {
			fi_freeinfo(hints);
			return -FI_ENOMEM;
		}
	}
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, out);
	fi_freeinfo(hints);
	return ret;
}

/* Close the endpoint alone (its posted operations end), so that the memory registrations
 * can be closed before the domain. */
void madmpi_ofi_close_ep(struct madmpi_ofi *o)
{
	if (o && o->ep) {
		fi_close(&o->ep->fid);
		o->ep = NULL;
	}
}

void madmpi_ofi_close(struct madmpi_ofi *o)
{
	if (!o)
		return;
	madmpi_ofi_close_ep(o);
	if (o->av)
		fi_close(&o->av->fid);
	if (o->cq)
		fi_close(&o->cq->fid);
	if (o->domain)
		fi_close(&o->domain->fid);
	if (o->fabric)
		fi_close(&o->fabric->fid);
	if (o->info)
		fi_freeinfo(o->info);
	free(o);
}

/* The name of the provider fi_getinfo would pick for an RDM endpoint with FI_MSG (empty and
 * a negative fi errno when none), without opening anything. */
int madmpi_ofi_probe(const char *prov, char *name, size_t len)
{
	struct fi_info *info = NULL;
	int ret = getinfo(prov, FI_MSG, &info);

	if (len)
		name[0] = 0;
	if (ret)
		return ret;
	copy_name(name, len, info->fabric_attr->prov_name);
	fi_freeinfo(info);
	return 0;
}

/* Open fabric, domain, completion queue, address vector and endpoint. `want_rma` asks for
 * FI_RMA reads as well, and falls back to FI_MSG alone when no provider offers it. On
 * failure, *call names the libfabric call that failed and the negative fi errno is
 * returned. */
int madmpi_ofi_open(const char *prov, int want_rma, uint64_t cq_size, struct madmpi_ofi **out,
		    struct madmpi_ofi_attr *attr, const char **call)
{
	struct madmpi_ofi *o = calloc(1, sizeof *o);
	struct fi_cq_attr cq_attr;
	struct fi_av_attr av_attr;
	int ret = -FI_ENODATA;

	*out = NULL;
	*call = "fi_getinfo";
	if (!o)
		return -FI_ENOMEM;
	/* Reads and writes (one-sided windows), else reads alone (rendezvous), else messages. */
	if (want_rma)
		ret = getinfo(prov,
			      FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
			      &o->info);
	if (ret && want_rma)
		ret = getinfo(prov, FI_MSG | FI_RMA | FI_READ | FI_REMOTE_READ, &o->info);
	if (ret)
		ret = getinfo(prov, FI_MSG, &o->info);
	if (ret)
		goto fail;

	*call = "fi_fabric";
	ret = fi_fabric(o->info->fabric_attr, &o->fabric, NULL);
	if (ret)
		goto fail;
	*call = "fi_domain";
	ret = fi_domain(o->fabric, o->info, &o->domain, NULL);
	if (ret)
		goto fail;

	memset(&cq_attr, 0, sizeof cq_attr);
	cq_attr.format = FI_CQ_FORMAT_MSG;
	cq_attr.wait_obj = FI_WAIT_NONE;
	cq_attr.size = cq_size;
	*call = "fi_cq_open";
	ret = fi_cq_open(o->domain, &cq_attr, &o->cq, NULL);
	if (ret)
		goto fail;

	memset(&av_attr, 0, sizeof av_attr);
	av_attr.type = FI_AV_TABLE;
	*call = "fi_av_open";
	ret = fi_av_open(o->domain, &av_attr, &o->av, NULL);
	if (ret)
		goto fail;

	*call = "fi_endpoint";
	ret = fi_endpoint(o->domain, o->info, &o->ep, NULL);
	if (ret)
		goto fail;
	*call = "fi_ep_bind(cq)";
	ret = fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		goto fail;
	*call = "fi_ep_bind(av)";
	ret = fi_ep_bind(o->ep, &o->av->fid, 0);
	if (ret)
		goto fail;
	*call = "fi_enable";
	ret = fi_enable(o->ep);
	if (ret)
		goto fail;

	memset(attr, 0, sizeof *attr);
	copy_name(attr->provider, sizeof attr->provider, o->info->fabric_attr->prov_name);
	copy_name(attr->fabric, sizeof attr->fabric, o->info->fabric_attr->name);
	copy_name(attr->domain, sizeof attr->domain, o->info->domain_attr->name);
	attr->caps = o->info->caps;
	attr->mode = o->info->mode;
	attr->mr_mode = (uint64_t)o->info->domain_attr->mr_mode;
	attr->max_msg_size = o->info->ep_attr->max_msg_size;
	attr->inject_size = o->info->tx_attr->inject_size;
	attr->iov_limit = o->info->tx_attr->iov_limit;
	attr->rma_iov_limit = o->info->tx_attr->rma_iov_limit;
	attr->tx_size = o->info->tx_attr->size;
	attr->rx_size = o->info->rx_attr->size;
	attr->mr_key_size = o->info->domain_attr->mr_key_size;
	*call = "";
	*out = o;
	return 0;
fail:
	madmpi_ofi_close(o);
	return ret;
}

/* The endpoint's address; *len is the room in `addr` on entry, the address length on
 * return. */
int madmpi_ofi_getname(struct madmpi_ofi *o, void *addr, size_t *len)
{
	return fi_getname(&o->ep->fid, addr, len);
}

/* Insert one peer address; its fi_addr_t in *fi_addr. Returns 1 on success. */
int madmpi_ofi_av_insert(struct madmpi_ofi *o, const void *addr, uint64_t *fi_addr)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int ret = fi_av_insert(o->av, addr, 1, &a, 0, NULL);

	*fi_addr = a;
	return ret;
}

/* Register `len` bytes at `buf` for `access` (FI_SEND, FI_RECV, FI_REMOTE_READ...), bound to
 * the endpoint when the provider asks for FI_MR_ENDPOINT. */
int madmpi_ofi_mr_reg(struct madmpi_ofi *o, const void *buf, size_t len, uint64_t access,
		      uint64_t requested_key, struct fid_mr **mr, void **desc, uint64_t *key,
		      const char **call)
{
	int ret;

	*mr = NULL;
	*call = "fi_mr_reg";
	ret = fi_mr_reg(o->domain, buf, len, access, 0, requested_key, 0, mr, NULL);
	if (ret)
		return ret;
	if (o->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		*call = "fi_mr_bind";
		ret = fi_mr_bind(*mr, &o->ep->fid, 0);
		if (!ret) {
			*call = "fi_mr_enable";
			ret = fi_mr_enable(*mr);
		}
		if (ret) {
			fi_close(&(*mr)->fid);
			*mr = NULL;
			return ret;
		}
	}
	*desc = fi_mr_desc(*mr);
	*key = fi_mr_key(*mr);
	*call = "";
	return 0;
}

int madmpi_ofi_mr_close(struct fid_mr *mr)
{
	return fi_close(&mr->fid);
}

ssize_t madmpi_ofi_send(struct madmpi_ofi *o, const void *buf, size_t len, void *desc,
			uint64_t dest, void *ctx)
{
	return fi_send(o->ep, buf, len, desc, dest, ctx);
}

/* Send `len` bytes (at most the provider's inject_size) that the provider copies before it
 * returns: the buffer is free at once and no completion is written. */
ssize_t madmpi_ofi_inject(struct madmpi_ofi *o, const void *buf, size_t len, uint64_t dest)
{
	return fi_inject(o->ep, buf, len, dest);
}

ssize_t madmpi_ofi_recv(struct madmpi_ofi *o, void *buf, size_t len, void *desc, void *ctx)
{
	return fi_recv(o->ep, buf, len, desc, FI_ADDR_UNSPEC, ctx);
}

ssize_t madmpi_ofi_read(struct madmpi_ofi *o, void *buf, size_t len, void *desc, uint64_t src,
			uint64_t addr, uint64_t key, void *ctx)
{
	return fi_read(o->ep, buf, len, desc, src, addr, key, ctx);
}

/* An RDMA write whose completion says the data is in the target's memory
 * (FI_DELIVERY_COMPLETE), not only that it left: a flush that waited for it may let a third
 * process read the data. `delivery` 0 asks the provider's default completion. */
ssize_t madmpi_ofi_write(struct madmpi_ofi *o, const void *buf, size_t len, void *desc,
			 uint64_t dest, uint64_t addr, uint64_t key, void *ctx, int delivery)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct fi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct fi_msg_rma msg;

	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.desc = &desc;
	msg.iov_count = 1;
	msg.addr = dest;
	msg.rma_iov = &rma;
	msg.rma_iov_count = 1;
	msg.context = ctx;
	return fi_writemsg(o->ep, &msg, FI_COMPLETION | (delivery ? FI_DELIVERY_COMPLETE : 0));
}

/* An empty queue reads 0 (not -FI_EAGAIN): the common answer of a poll needs no check. */
ssize_t madmpi_ofi_cq_read(struct madmpi_ofi *o, struct fi_cq_msg_entry *entries, size_t count)
{
	ssize_t ret = fi_cq_read(o->cq, entries, count);

	return ret == -FI_EAGAIN ? 0 : ret;
}

/* The oldest error completion: its context, and its error text in `text`. */
ssize_t madmpi_ofi_cq_readerr(struct madmpi_ofi *o, void **ctx, int *err, char *text,
			      size_t len)
{
	struct fi_cq_err_entry e;
	ssize_t ret;
	const char *s;

	memset(&e, 0, sizeof e);
	ret = fi_cq_readerr(o->cq, &e, 0);
	if (ret < 0)
		return ret;
	*ctx = e.op_context;
	*err = e.err;
	s = fi_cq_strerror(o->cq, e.prov_errno, e.err_data, NULL, 0);
	copy_name(text, len, s ? s : fi_strerror(e.err));
	return ret;
}

const char *madmpi_ofi_strerror(int err)
{
	if (load())
		return load_error;
	return fi_strerror(err < 0 ? -err : err);
}

/* Constants the Rust side needs, from the headers rather than copied. */
uint64_t madmpi_ofi_const(int which)
{
	switch (which) {
	case 0: return FI_RMA;
	case 1: return FI_MR_LOCAL;
	case 2: return FI_MR_VIRT_ADDR;
	case 3: return FI_MR_PROV_KEY;
	case 4: return FI_SEND;
	case 5: return FI_RECV;
	case 6: return FI_READ;
	case 7: return FI_REMOTE_READ;
	case 8: return FI_EAGAIN;
	case 9: return FI_EAVAIL;
	case 10: return sizeof(struct fi_context2);
	case 11: return FI_MR_ENDPOINT;
	case 12: return FI_WRITE;
	case 13: return FI_REMOTE_WRITE;
	default: return 0;
	}
}
