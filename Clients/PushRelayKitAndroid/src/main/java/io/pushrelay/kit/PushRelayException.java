package io.pushrelay.kit;

import androidx.annotation.NonNull;
import androidx.annotation.Nullable;

/**
 * Why a PushRelayKit call or one of the counter's own requests failed. {@link #getKind()} says
 * which of the documented cases it is; {@link #isTransient()} whether trying again later may help.
 */
public final class PushRelayException extends Exception {
    private static final long serialVersionUID = 1L;

    /** The cases, as docs/client.md's table of errors lists them. */
    public enum Kind {
        /** No user is authorized: call {@link PushRelayClient#authorize} first. */
        NOT_AUTHORIZED,
        /**
         * The relay refused the user token, also a fresh one from the token provider (a wrong
         * signing key, a {@code sub} that is not the user, an app without user tokens).
         */
        UNAUTHORIZED,
        /** The token provider threw, or returned no token. */
        TOKEN_PROVIDER,
        /** The relay could not be reached or the connection broke (no network, relay down, timeout). */
        NETWORK,
        /** The relay answered with an error: {@link #getStatus()}, {@link #getCode()} and the message. */
        SERVER,
        /** The relay's answer was not what the API promises. */
        INVALID_RESPONSE,
        /** The push key store failed to read or save a key; nothing was sent. */
        PUSH_KEY_STORE
    }

    /** Which case this is (serialized with the exception). */
    private final Kind kind;
    /** The HTTP status, or 0. */
    private final int status;
    /** The relay's error code, or null. */
    private final String code;

    PushRelayException(Kind kind, String message, int status, String code, Throwable cause) {
        super(message, cause);
        this.kind = kind;
        this.status = status;
        this.code = code;
    }

    static PushRelayException notAuthorized() {
        return new PushRelayException(Kind.NOT_AUTHORIZED, "no user is authorized", 0, null, null);
    }

    static PushRelayException unauthorized(String message) {
        return new PushRelayException(Kind.UNAUTHORIZED, message, 401, null, null);
    }

    static PushRelayException tokenProvider(String message, Throwable cause) {
        return new PushRelayException(Kind.TOKEN_PROVIDER, message, 0, null, cause);
    }

    static PushRelayException network(String message, Throwable cause) {
        return new PushRelayException(Kind.NETWORK, message, 0, null, cause);
    }

    static PushRelayException server(int status, String code, String message) {
        return new PushRelayException(Kind.SERVER, message, status, code, null);
    }

    static PushRelayException invalidResponse(String message) {
        return new PushRelayException(Kind.INVALID_RESPONSE, message, 0, null, null);
    }

    static PushRelayException pushKeyStore(String message, Throwable cause) {
        return new PushRelayException(Kind.PUSH_KEY_STORE, message, 0, null, cause);
    }

    /** Which documented case this is. */
    @NonNull
    public Kind getKind() {
        return kind;
    }

    /** The HTTP status for {@link Kind#SERVER} (and 401 for {@link Kind#UNAUTHORIZED}); 0 otherwise. */
    public int getStatus() {
        return status;
    }

    /**
     * The relay's error code for {@link Kind#SERVER} ({@code too_many_streams}, or
     * {@code http_<status>} when the answer had no error body); {@code null} otherwise.
     */
    @Nullable
    public String getCode() {
        return code;
    }

    /** Worth retrying later by itself: the network, or a relay busy or restarting (429, 5xx). */
    public boolean isTransient() {
        return kind == Kind.NETWORK || (kind == Kind.SERVER && (status == 429 || status >= 500));
    }

    @Override
    public String toString() {
        switch (kind) {
            case NOT_AUTHORIZED: return "PushRelayException: no user is authorized";
            case UNAUTHORIZED: return "PushRelayException: the relay refused the user token: " + getMessage();
            case TOKEN_PROVIDER: return "PushRelayException: the token provider failed: " + getMessage();
            case NETWORK: return "PushRelayException: network error: " + getMessage();
            case SERVER: return "PushRelayException: the relay answered " + status + " " + code + ": " + getMessage();
            case INVALID_RESPONSE: return "PushRelayException: unexpected answer from the relay: " + getMessage();
            default: return "PushRelayException: the push key store failed: " + getMessage();
        }
    }
}
