/* llm_mock.c - a bench-only mock LLM server in C (libuv + http-parser),
 * for bench-llm (bench/llm_bench.c): it answers what bench-llm sends as
 * spec/llm/mock_llm.js does with bench-llm's script ({"delay_ms": D,
 * "default": "ok"}), at a fraction of Node's CPU per request.
 *
 * Why: at 1,000 requests in flight and 50 ms the mock must answer 20,000
 * requests/s; Node's HTTP server takes 150-300 us of CPU per request, so
 * on a 2-core machine it alone needs more than a core and the wall time
 * measured is the two processes sharing the cores, not ludo's loop. The
 * tests keep the Node mock (rules, 429s, drops, recording...).
 *
 * What it does: listens on 127.0.0.1 (an ephemeral port), prints
 *   mock-llm listening on http://127.0.0.1:PORT
 * and answers every POST .../chat/completions (OpenAI) or .../messages
 * (Anthropic), after D ms, with the reply text and the body shape of
 * mock_llm.js (usage: prompt 1 and completion 1 tokens: it does not
 * count words); other requests get a 404. Keep-alive as the client asks.
 * No rules, no recording, no control routes.
 *
 * usage: ludo-llm-mock [--delay-ms D] [--reply TEXT]
 *        (TEXT: under 512 bytes, no '"' nor '\\') */
#include <http_parser.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static int delay_ms = 0;
static const char *reply = "ok";

typedef struct conn_s {
  uv_tcp_t tcp;
  http_parser parser;
  char url[256];
  size_t url_len;
  int pending;        /* replies waiting on their timer */
  int closing, closed;
} conn_t;

typedef struct {
  uv_timer_t timer;
  conn_t *c;
  int api;            /* 0 OpenAI, 1 Anthropic, -1 no route */
  int keep_alive;
} answer_t;

typedef struct {
  uv_write_t w;
  char data[];
} wbuf_t;

static http_parser_settings settings;

/* A connection goes when its socket closed and no reply is due. */
static void conn_closed(uv_handle_t *h) {
  conn_t *c = h->data;
  c->closed = 1;
  if (c->pending == 0) free(c);
}

static void conn_close(conn_t *c) {
  if (c->closing) return;
  c->closing = 1;
  uv_close((uv_handle_t *)&c->tcp, conn_closed);
}

static void written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

/* Writes `n` bytes: at once when the socket takes them, else queued. */
static void send_all(conn_t *c, const char *p, size_t n) {
  uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
  int r = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
  wbuf_t *w;
  if (r == (int)n) return;
  if (r < 0 && r != UV_EAGAIN) {
    conn_close(c);
    return;
  }
  if (r < 0) r = 0;
  if ((w = malloc(sizeof *w + n - (size_t)r)) == NULL) abort();
  memcpy(w->data, p + r, n - (size_t)r);
  b = uv_buf_init(w->data, (unsigned)(n - (size_t)r));
  if (uv_write(&w->w, (uv_stream_t *)&c->tcp, &b, 1, written) != 0) {
    free(w);
    conn_close(c);
  }
}

/* The reply body of mock_llm.js's okBody for `api`. */
static int body_of(int api, char *out, size_t size) {
  if (api == 1)
    return snprintf(out, size,
                    "{\"id\":\"msg_mock\",\"type\":\"message\",\"role\":"
                    "\"assistant\",\"model\":\"mock\",\"content\":[{\"type\":"
                    "\"text\",\"text\":\"%s\"}],\"stop_reason\":\"end_turn\","
                    "\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}",
                    reply);
  if (api == 0)
    return snprintf(out, size,
                    "{\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion\","
                    "\"model\":\"mock\",\"choices\":[{\"index\":0,\"message\":"
                    "{\"role\":\"assistant\",\"content\":\"%s\"},"
                    "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\""
                    ":1,\"completion_tokens\":1,\"total_tokens\":2}}",
                    reply);
  return snprintf(out, size, "{\"error\":{\"message\":\"no route\"}}");
}

static void answer_closed(uv_handle_t *h) {
  answer_t *a = h->data;
  conn_t *c = a->c;
  if (--c->pending == 0 && c->closed) free(c);
  free(a);
}

static void answer_now(uv_timer_t *t) {
  answer_t *a = t->data;
  conn_t *c = a->c;
  char body[1024], msg[1400];
  int bn = body_of(a->api, body, sizeof body), n;
  if (!c->closing) {
    n = snprintf(msg, sizeof msg,
                 "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\nConnection: %s\r\n\r\n%s",
                 a->api >= 0 ? "200 OK" : "404 Not Found", bn,
                 a->keep_alive ? "keep-alive" : "close", body);
    send_all(c, msg, (size_t)n);
    if (!a->keep_alive) conn_close(c);
  }
  uv_close((uv_handle_t *)t, answer_closed);
}

static int api_of(const conn_t *c, int method) {
  static const char *tails[] = {"/chat/completions", "/messages"};
  size_t i, n = c->url_len;
  const char *q = memchr(c->url, '?', n);
  if (q != NULL) n = (size_t)(q - c->url);
  if (method != HTTP_POST) return -1;
  for (i = 0; i < 2; i++) {
    size_t t = strlen(tails[i]);
    if (n >= t && memcmp(c->url + n - t, tails[i], t) == 0) return (int)i;
  }
  return -1;
}

static int on_url(http_parser *p, const char *at, size_t n) {
  conn_t *c = p->data;
  if (n > sizeof c->url - c->url_len) n = sizeof c->url - c->url_len;
  memcpy(c->url + c->url_len, at, n);
  c->url_len += n;
  return 0;
}

static int on_message_begin(http_parser *p) {
  ((conn_t *)p->data)->url_len = 0;
  return 0;
}

static int on_message_complete(http_parser *p) {
  conn_t *c = p->data;
  answer_t *a = malloc(sizeof *a);
  if (a == NULL) abort();
  a->c = c;
  a->api = api_of(c, (int)p->method);
  a->keep_alive = http_should_keep_alive(p);
  uv_timer_init(c->tcp.loop, &a->timer);
  a->timer.data = a;
  c->pending++;
  uv_timer_start(&a->timer, answer_now, a->api >= 0 ? (uint64_t)delay_ms : 0,
                 0);
  return 0;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
  static char buf[65536];
  (void)h;
  (void)hint;
  *b = uv_buf_init(buf, sizeof buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  conn_t *c = s->data;
  if (n < 0) { /* EOF or an error: replies still due are dropped */
    conn_close(c);
    return;
  }
  if (n > 0 && http_parser_execute(&c->parser, &settings, b->base,
                                   (size_t)n) != (size_t)n) {
    uv_read_stop(s);
    conn_close(c);
  }
}

static void on_conn(uv_stream_t *server, int status) {
  conn_t *c;
  if (status < 0 || (c = calloc(1, sizeof *c)) == NULL) return;
  uv_tcp_init(server->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_signal(uv_signal_t *s, int sig) {
  (void)sig;
  uv_stop(s->loop);
}

int main(int argc, char **argv) {
  uv_loop_t *loop = uv_default_loop();
  uv_tcp_t server;
  uv_signal_t sigterm, sigint;
  struct sockaddr_in addr;
  struct sockaddr_storage got;
  int i, len = sizeof got;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--delay-ms") == 0 && i + 1 < argc)
      delay_ms = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reply") == 0 && i + 1 < argc &&
             strpbrk(argv[i + 1], "\"\\") == NULL && strlen(argv[i + 1]) < 512)
      reply = argv[++i]; /* put in the JSON as it is */
    else {
      fprintf(stderr, "usage: ludo-llm-mock [--delay-ms D] [--reply TEXT]\n");
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  http_parser_settings_init(&settings);
  settings.on_message_begin = on_message_begin;
  settings.on_url = on_url;
  settings.on_message_complete = on_message_complete;
  uv_tcp_init(loop, &server);
  uv_ip4_addr("127.0.0.1", 0, &addr);
  if (uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0) != 0 ||
      uv_listen((uv_stream_t *)&server, 4096, on_conn) != 0 ||
      uv_tcp_getsockname(&server, (struct sockaddr *)&got, &len) != 0) {
    fprintf(stderr, "ludo-llm-mock: cannot listen\n");
    return 1;
  }
  printf("mock-llm listening on http://127.0.0.1:%d\n",
         ntohs(((struct sockaddr_in *)&got)->sin_port));
  fflush(stdout);
  uv_signal_init(loop, &sigterm);
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_signal_init(loop, &sigint);
  uv_signal_start(&sigint, on_signal, SIGINT);
  uv_run(loop, UV_RUN_DEFAULT);
  return 0;
}
