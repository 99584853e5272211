/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The part of the Neuron SDK's libndl interface (ndl/ndl.h) that the datastore path uses: the
 * device handle and its init parameters, and opening and closing a device. The types are laid
 * out as the SDK declares them, so SDK code that reads a field (device_index) or sizes the
 * struct compiles and behaves unchanged. Everything else libndl offers (BAR access, memory,
 * DMA, notification queues) drives hardware and is not provided.
 *
 * Implemented by the nds-capi library (libnds_capi.so / libnds_capi.a), next to neuron_ds.h.
 */
#ifndef NDL_H
#define NDL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "neuron_driver_shared.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device nodes are NEURON_DEVICE_PREFIX followed by the device index: /dev/neuron0, ... */
#define NEURON_DEVICE_PREFIX "/dev/neuron"
#define MAX_NEURON_DEVICE_COUNT 64
#define NEURON_MAX_DEVICES MAX_NEURON_DEVICE_COUNT
#define MAX_NC_PER_DEVICE 8
#define MAX_HBM_PER_DEVICE 4

/*
 * Options of ndl_open_device(). This library drives no hardware, so it accepts them (or NULL)
 * and acts on none: there is no device to initialize and no HBM to map.
 */
typedef struct ndl_device_init_param {
	bool initialize_device;
	int num_dram_regions;
	bool map_hbm;
} ndl_device_init_param_t;

/* A host buffer for copies to and from the device; never set up by this library. */
typedef struct ndl_copy_buf {
	uint64_t mem_handle;
	void *mmap_va;
	pthread_mutex_t lock;
} ndl_copy_buf_t;

/*
 * An open device, as ndl_open_device() returns it. This library fills device_index and zeroes
 * every hardware field (type, revision, connected devices, BARs, copy buffers, HBM). context[]
 * is the library's own: it starts with an ndl_device_context_t, then private state. The struct
 * must only be created by ndl_open_device() (or this library's nds_device_open*() extensions in
 * neuron_ds.h) and freed by the matching close.
 */
typedef struct ndl_device {
	uint8_t device_index;
	uint8_t device_type;
	uint16_t device_revision;
	uint8_t connected_device_count;
	uint8_t connected_devices[MAX_NEURON_DEVICE_COUNT];
	uint64_t csr_base[2];
	uint64_t csr_size[2];
	ndl_copy_buf_t cpy_bufs[MAX_NC_PER_DEVICE];
	void *hbm_va[MAX_HBM_PER_DEVICE];
	size_t hbm_size;
	uint32_t hbm_va_cnt;
	uint32_t shift_hbm_size;
	uint64_t hbm_offset[MAX_HBM_PER_DEVICE];
	uint8_t context[];
} ndl_device_t;

/* The start of ndl_device_t.context: the device node's descriptor (-1 for a slab file). */
typedef struct ndl_device_context {
	int nd_fd;
} ndl_device_context_t;

/*
 * Opens device device_index (0 to MAX_NEURON_DEVICE_COUNT - 1): opens the node
 * NEURON_DEVICE_PREFIX<device_index> read-write and keeps it open until ndl_close_device().
 * params may be NULL. On success stores the handle in *device and returns 0. On failure returns
 * -1 with errno set (EINVAL for a bad index or a NULL device, otherwise open(2)'s errno, e.g.
 * ENOENT when the module is not loaded) and leaves *device untouched.
 *
 * The handle only names the device: nds_open() acquires and maps a datastore through it, and
 * a datastore stays valid after its device is closed.
 */
int ndl_open_device(int device_index, ndl_device_init_param_t *params, ndl_device_t **device);

/*
 * Closes the node and frees the handle, which must not be used afterwards. Returns 0; -1 with
 * errno set when device is NULL (EINVAL) or close(2) failed (the handle is freed regardless).
 */
int ndl_close_device(ndl_device_t *device);

#ifdef __cplusplus
}
#endif

#endif /* NDL_H */
