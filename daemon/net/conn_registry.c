#include "conn_registry.h"

#include "connection.h"

void pcd_conn_registry_init(pcd_conn_registry *r) { pthread_mutex_init(&r->lock, NULL); }

void pcd_conn_registry_count_in(pcd_conn_registry *r) { atomic_fetch_add(&r->n_open, 1); }

void pcd_conn_registry_count_out(pcd_conn_registry *r) {
  uint64_t left = atomic_fetch_sub(&r->n_open, 1) - 1;
  if (left == 0 && r->on_empty)
    uv_async_send(r->on_empty);
}

void pcd_conn_registry_add(pcd_conn_registry *r, pcd_conn *conn) {
  pthread_mutex_lock(&r->lock);
  conn->id = ++r->last_id;
  conn->reg_next = NULL;
  conn->reg_prev = r->tail;
  if (r->tail)
    r->tail->reg_next = conn;
  else
    r->head = conn;
  r->tail = conn;
  pthread_mutex_unlock(&r->lock);
}

void pcd_conn_registry_remove(pcd_conn_registry *r, pcd_conn *conn) {
  pthread_mutex_lock(&r->lock);
  if (conn->reg_prev)
    conn->reg_prev->reg_next = conn->reg_next;
  else
    r->head = conn->reg_next;
  if (conn->reg_next)
    conn->reg_next->reg_prev = conn->reg_prev;
  else
    r->tail = conn->reg_prev;
  if (conn->reg_reaping)
    r->n_reaping--;
  pthread_mutex_unlock(&r->lock);
}
