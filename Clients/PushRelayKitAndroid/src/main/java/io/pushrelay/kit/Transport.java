package io.pushrelay.kit;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.MalformedURLException;
import java.net.URL;
import java.nio.charset.Charset;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * How requests reach the relay: {@code <base>/v1/apps/<app>/…} over HttpURLConnection, without a
 * response cache (the counter makes its own conditional requests, and Android's cache would turn
 * a 304 into a 200) and without following redirects (the user JWT goes to the relay only).
 */
final class Transport {
    static final Charset UTF8 = Charset.forName("UTF-8");
    /** An answer larger than this is not the relay's (its largest, a device list, is far smaller). */
    private static final int MAX_BODY = 4 * 1024 * 1024;
    private static final String UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";

    /** One answer: status, headers (names in lower case, first value), body. */
    static final class Response {
        final int status;
        final Map<String, String> headers;
        final byte[] body;

        Response(int status, Map<String, String> headers, byte[] body) {
            this.status = status;
            this.headers = headers;
            this.body = body;
        }

        String header(String name) {
            return headers.get(name.toLowerCase(Locale.ROOT));
        }

        String text() {
            return new String(body, UTF8);
        }
    }

    /**
     * Where the connection of one request is kept, so another thread can end it: the counter's
     * runner when the app changes mode, or {@link Transport#close()}.
     */
    static final class Hold {
        private HttpURLConnection connection;
        private boolean cancelled;

        /** Keeps {@code connection}; false (and it is ended) when the hold was cancelled already. */
        synchronized boolean attach(HttpURLConnection connection) {
            if (cancelled) {
                connection.disconnect();
                return false;
            }
            this.connection = connection;
            return true;
        }

        synchronized boolean isCancelled() {
            return cancelled;
        }

        /** Ends the request under way (a blocked read fails at once) and any later one. */
        synchronized void cancel() {
            cancelled = true;
            if (connection != null) connection.disconnect();
        }
    }

    private final String base;
    private final int timeoutMillis;
    private final Set<Hold> active = new HashSet<Hold>();
    private boolean closed;

    Transport(String baseUrl, String appId, int timeoutMillis) {
        String trimmed = baseUrl;
        while (trimmed.endsWith("/")) trimmed = trimmed.substring(0, trimmed.length() - 1);
        this.base = trimmed + "/v1/apps/" + encodeSegment(appId);
        this.timeoutMillis = timeoutMillis;
        url(Collections.<String>emptyList());  // fails now on a base URL that is not one
    }

    /** {@code <base>/v1/apps/<app>/<segments…>}, each segment percent-encoded. */
    URL url(List<String> segments) {
        StringBuilder text = new StringBuilder(base);
        for (String segment : segments) text.append('/').append(encodeSegment(segment));
        try {
            return new URL(text.toString());
        } catch (MalformedURLException error) {
            throw new IllegalArgumentException("not a URL: " + error.getMessage(), error);
        }
    }

    /** RFC 3986 unreserved characters stay; every other UTF-8 byte is percent-encoded. */
    static String encodeSegment(String segment) {
        StringBuilder text = new StringBuilder();
        for (byte value : segment.getBytes(UTF8)) {
            char character = (char) (value & 0xff);
            if (value >= 0 && UNRESERVED.indexOf(character) >= 0) {
                text.append(character);
            } else {
                text.append('%').append(Character.toUpperCase(Character.forDigit((value >> 4) & 15, 16)))
                    .append(Character.toUpperCase(Character.forDigit(value & 15, 16)));
            }
        }
        return text.toString();
    }

    /**
     * Sends a request with the user's token; on a 401 once more with a fresh token from the
     * provider. Any answer but a second 401 is returned, whatever its status.
     */
    Response send(final String method, final List<String> segments, final byte[] body, final Map<String, String> headers,
        UserSession user, final Hold hold) throws PushRelayException {
        return user.withToken(new UserSession.Attempt<Response>() {
            @Override
            public Response run(String token) throws PushRelayException, UserSession.Refused {
                Response response = perform(method, url(segments), body, headers, token, hold);
                if (response.status == 401) throw new UserSession.Refused(errorMessage(response, "401"));
                return response;
            }
        });
    }

    /** Sends and requires a 2xx answer. */
    Response sendExpectingSuccess(String method, List<String> segments, byte[] body, UserSession user) throws PushRelayException {
        Response response = send(method, segments, body, Collections.<String, String>emptyMap(), user, null);
        if (response.status < 200 || response.status > 299) throw serverError(response);
        return response;
    }

    /** One request with {@code token}; {@code hold} (optional) lets another thread end it. */
    Response perform(String method, URL url, byte[] body, Map<String, String> headers, String token, Hold hold)
        throws PushRelayException {
        Hold request = hold == null ? new Hold() : hold;
        HttpURLConnection connection = null;
        register(request);
        try {
            connection = open(url, method, headers, token, timeoutMillis);
            if (!request.attach(connection)) throw PushRelayException.network("cancelled", null);
            if (body != null) {
                connection.setDoOutput(true);
                connection.setRequestProperty("Content-Type", "application/json");
                OutputStream output = connection.getOutputStream();
                try {
                    output.write(body);
                } finally {
                    output.close();
                }
            }
            int status = connection.getResponseCode();
            if (status < 0) throw PushRelayException.invalidResponse("not an HTTP answer");
            return answer(connection, status);
        } catch (IOException error) {
            throw PushRelayException.network(request.isCancelled() ? "cancelled" : describe(error), error);
        } finally {
            unregister(request);
            if (connection != null && request.isCancelled()) connection.disconnect();
        }
    }

    /** A connection with the relay's headers set, not yet connected. */
    HttpURLConnection open(URL url, String method, Map<String, String> headers, String token, int readTimeoutMillis)
        throws IOException {
        HttpURLConnection connection = (HttpURLConnection) url.openConnection();
        connection.setRequestMethod(method);
        connection.setUseCaches(false);
        connection.setInstanceFollowRedirects(false);
        connection.setConnectTimeout(timeoutMillis);
        connection.setReadTimeout(readTimeoutMillis);
        connection.setRequestProperty("Accept", "application/json");
        connection.setRequestProperty("Authorization", "Bearer " + token);
        for (Map.Entry<String, String> header : headers.entrySet()) connection.setRequestProperty(header.getKey(), header.getValue());
        return connection;
    }

    /** Keeps {@code hold} so {@link #close()} can end it; fails when the client is closed. */
    void register(Hold hold) throws PushRelayException {
        synchronized (active) {
            if (closed) throw PushRelayException.network("the client is closed", null);
            active.add(hold);
        }
    }

    void unregister(Hold hold) {
        synchronized (active) {
            active.remove(hold);
        }
    }

    /** Ends every request under way; later requests fail at once. */
    void close() {
        Hold[] holds;
        synchronized (active) {
            closed = true;
            holds = active.toArray(new Hold[0]);
        }
        for (Hold hold : holds) hold.cancel();
    }

    static Map<String, String> headers(HttpURLConnection connection) {
        Map<String, String> headers = new HashMap<String, String>();
        for (Map.Entry<String, List<String>> field : connection.getHeaderFields().entrySet()) {
            if (field.getKey() != null && !field.getValue().isEmpty()) {
                headers.put(field.getKey().toLowerCase(Locale.ROOT), field.getValue().get(0));
            }
        }
        return headers;
    }

    /** The whole answer of {@code connection}, whose status is {@code status}: headers and body. */
    static Response answer(HttpURLConnection connection, int status) throws IOException {
        InputStream input;
        try {
            input = status >= 400 ? connection.getErrorStream() : connection.getInputStream();
        } catch (IOException noBody) {
            input = null;
        }
        byte[] data;
        try {
            data = input == null ? new byte[0] : Streams.readAll(input, MAX_BODY);
        } catch (IOException error) {
            throw new IOException("an answer of " + error.getMessage(), error);
        }
        return new Response(status, headers(connection), data);
    }

    /** The relay's error answer: {@code {"error":{"code","message"}}}, or the status alone. */
    static PushRelayException serverError(Response response) {
        try {
            JSONObject error = new JSONObject(response.text()).getJSONObject("error");
            Object code = error.opt("code");
            Object message = error.opt("message");
            if (code instanceof String && message instanceof String) {
                return PushRelayException.server(response.status, (String) code, (String) message);
            }
        } catch (JSONException notTheRelays) {
            // Falls through to the status alone.
        }
        return PushRelayException.server(response.status, "http_" + response.status, "HTTP status " + response.status);
    }

    /** The error body's message, or {@code fallback}. */
    static String errorMessage(Response response, String fallback) {
        try {
            Object message = new JSONObject(response.text()).getJSONObject("error").opt("message");
            return message instanceof String ? (String) message : fallback;
        } catch (JSONException notTheRelays) {
            return fallback;
        }
    }

    static String describe(IOException error) {
        String message = error.getMessage();
        return error.getClass().getSimpleName() + (message == null ? "" : ": " + message);
    }
}
