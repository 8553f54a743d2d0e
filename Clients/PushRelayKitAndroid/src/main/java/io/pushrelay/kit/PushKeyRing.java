package io.pushrelay.kit;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * A store's keys, newest first, and how they are written: {@code {"keys":[{"id":…,"key":<base64>}]}},
 * the format PushRelayKit for Apple platforms writes too.
 */
final class PushKeyRing {
    private PushKeyRing() {}

    /** {@code keys} (newest first) after saving {@code key}. */
    static List<PushKey> saving(PushKey key, List<PushKey> keys) {
        List<PushKey> result = new ArrayList<PushKey>();
        result.add(key);
        for (PushKey kept : keys) {
            if (result.size() == PushKeyStore.KEPT) break;
            if (!kept.getId().equals(key.getId())) result.add(kept);
        }
        return result;
    }

    static PushKey find(List<PushKey> keys, String id) {
        for (PushKey key : keys) {
            if (key.getId().equals(id)) return key;
        }
        return null;
    }

    static String encode(List<PushKey> keys) {
        try {
            JSONArray list = new JSONArray();
            for (PushKey key : keys) list.put(new JSONObject().put("id", key.getId()).put("key", key.getBase64()));
            return new JSONObject().put("keys", list).toString();
        } catch (JSONException impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    static List<PushKey> decode(String text) throws IOException {
        try {
            JSONArray list = new JSONObject(text).getJSONArray("keys");
            List<PushKey> keys = new ArrayList<PushKey>();
            for (int index = 0; index < list.length(); index++) {
                JSONObject entry = list.getJSONObject(index);
                Object id = entry.opt("id");
                Object key = entry.opt("key");
                PushKey pushKey = id instanceof String && key instanceof String ? PushKey.fromBase64((String) id, (String) key) : null;
                if (pushKey == null) throw new IOException("a stored push key is not valid");
                keys.add(pushKey);
            }
            return keys;
        } catch (JSONException error) {
            throw new IOException("the push key file is not valid JSON", error);
        }
    }
}
