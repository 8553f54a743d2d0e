package io.pushrelay.kit;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Signs user JWTs as an app's backend would (HS256 with the app's {@code user_tokens} key) and
 * records the provider's calls. The tests make it fail, sign with a wrong key, give short-lived
 * tokens or hold a call.
 */
final class TokenIssuer implements UserTokenProvider {
    private final byte[] key;
    private final List<String> calls = new ArrayList<>();
    private volatile long lifetimeSeconds = 600;
    private volatile int wrongKeyCalls;
    private volatile boolean failing;
    private volatile CountDownLatch gate;

    TokenIssuer(String app) {
        key = Relay.userTokenKey(app);
    }

    @Override
    public String userToken(String userId) throws Exception {
        synchronized (calls) {
            calls.add(userId);
        }
        CountDownLatch held = gate;
        if (held != null && !held.await(Eventually.HANG_SECONDS, TimeUnit.SECONDS)) throw new IllegalStateException("never released");
        if (failing) throw new IllegalStateException("backend unreachable");
        boolean wrong;
        synchronized (this) {
            wrong = wrongKeyCalls > 0;
            if (wrong) wrongKeyCalls--;
        }
        return sign(userId, System.currentTimeMillis() / 1000 + lifetimeSeconds, wrong ? "not-the-apps-key-0123456789abcdef".getBytes() : key);
    }

    /** The provider's calls so far. */
    int calls() {
        synchronized (calls) {
            return calls.size();
        }
    }

    /** The next {@code count} tokens are signed with a key the relay does not know (401). */
    synchronized void signWithWrongKey(int count) {
        wrongKeyCalls = count;
    }

    /** Whether the provider throws (the app's backend unreachable). */
    void setFailing(boolean failing) {
        this.failing = failing;
    }

    /** The lifetime of the tokens signed from now on. */
    void setLifetimeSeconds(long seconds) {
        lifetimeSeconds = seconds;
    }

    /** Holds every call until the returned latch is counted down. */
    CountDownLatch hold() {
        gate = new CountDownLatch(1);
        return gate;
    }

    /** A token for {@code userId} valid for {@code seconds}, signed with the app's key. */
    String token(String userId, long seconds) throws Exception {
        return sign(userId, System.currentTimeMillis() / 1000 + seconds, key);
    }

    static String sign(String subject, long expires, byte[] key) throws Exception {
        Base64.Encoder encoder = Base64.getUrlEncoder().withoutPadding();
        String header = encoder.encodeToString("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".getBytes(StandardCharsets.UTF_8));
        String claims = encoder.encodeToString(("{\"sub\":" + org.json.JSONObject.quote(subject) + ",\"iat\":"
            + System.currentTimeMillis() / 1000 + ",\"exp\":" + expires + "}").getBytes(StandardCharsets.UTF_8));
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        String signed = header + "." + claims;
        return signed + "." + encoder.encodeToString(mac.doFinal(signed.getBytes(StandardCharsets.US_ASCII)));
    }
}
