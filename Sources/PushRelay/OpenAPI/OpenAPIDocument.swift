/// The OpenAPI 3 description of every endpoint, served at `GET /openapi.yaml`.
///
/// Kept in code so the binary carries it; a test checks that its paths and methods are exactly
/// the routes the router serves.
enum OpenAPIDocument {
    static let yaml = #"""
        openapi: 3.0.3
        info:
          title: PushRelay
          version: 0.1.0
          description: >-
            Self-hosted push-notification relay. Zendesk Support SDK webhooks in, APNs and FCM pushes
            out. Every error response is {"error":{"code","message"}}. Path parameters are
            percent-decoded once; one that is not percent-encoded UTF-8 or holds a control character
            (U+0000-U+001F, U+007F-U+009F) is a 400. A method a path does not serve is a 405 with Allow.
        servers:
          - url: http://127.0.0.1:8080
        components:
          securitySchemes:
            bearer:
              type: http
              scheme: bearer
              description: >-
                An API key (prk_…, app or admin) or, for device and unread endpoints, a user JWT
                (HS256, signed with the app's user_tokens key, `sub` = user id, `exp` required).
                A request without Authorization but with the operator console's session cookie
                (pushrelay_session) acts as the key the session was opened with; its requests other
                than GET and HEAD need the session's X-CSRF-Token header (403 csrf_token_invalid).
          parameters:
            app:
              name: app
              in: path
              required: true
              description: A configured app's id; any other is a 404.
              schema: {type: string, pattern: "^[a-z0-9][a-z0-9_-]{0,63}$"}
              example: support
            token:
              name: token
              in: path
              required: true
              description: >-
                A device token: 1-1024 printable ASCII characters without spaces. Registering an iOS
                device (PUT) needs an APNs token, hex of even length, 32-200 characters (stored
                lower-case; hex tokens are looked up lower-case).
              schema: {$ref: "#/components/schemas/Token"}
              example: 6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e
            user:
              name: user
              in: path
              required: true
              description: >-
                The owner of devices and counts: a user id or, for devices linked to no user, a device
                token. 1-1024 bytes (UTF-8), no control character.
              schema: {type: string, minLength: 1, maxLength: 1024, pattern: '^[^\x00-\x1F\x7F-\x9F]+$'}
              example: alice
            ticket:
              name: ticket
              in: path
              required: true
              description: A ticket id, as the webhook's notification.ticket_id. 1-255 bytes (UTF-8), no control character.
              schema: {$ref: "#/components/schemas/TicketID"}
              example: "5"
            job:
              name: id
              in: path
              required: true
              description: A job id; an id that is not a UUID names no job (404).
              schema: {type: string, format: uuid}
            limit:
              name: limit
              in: query
              required: false
              description: Most items in the page, 1-500 (50 when absent).
              schema: {type: integer, minimum: 1, maximum: 500}
            cursor:
              name: cursor
              in: query
              required: false
              description: The next value of the previous page; absent for the first page.
              schema: {type: string, pattern: "^[1-9][0-9]{0,18}$"}
            tokens:
              name: tokens
              in: query
              required: false
              description: >-
                short (the default): device tokens shortened as in logs. full: whole tokens, for admin keys and app
                keys that also hold devices:read (403 otherwise).
              schema: {type: string, enum: [short, full]}
          schemas:
            Token:
              type: string
              description: 1-1024 printable ASCII characters without spaces.
              pattern: "^[!-~]{1,1024}$"
            TicketID:
              type: string
              description: 1-255 bytes (UTF-8), no control character.
              minLength: 1
              maxLength: 255
              pattern: '^[^\x00-\x1F\x7F-\x9F]+$'
            Job:
              type: object
              required: [id, app_id, kind, status, propagate_to_zendesk, total, processed, removed, not_found, failed, forwarded, created_at]
              properties:
                id: {type: string, format: uuid}
                app_id: {type: string}
                kind: {type: string, enum: [bulk_unregister]}
                status: {type: string, enum: [queued, running, succeeded, failed, cancelled]}
                propagate_to_zendesk: {type: boolean}
                total: {type: integer}
                processed: {type: integer}
                removed: {type: integer}
                not_found: {type: integer}
                failed: {type: integer}
                forwarded: {type: integer, description: Tokens of this job Zendesk has accepted.}
                error: {type: string, nullable: true}
                created_at: {type: string, format: date-time}
                started_at: {type: string, format: date-time, nullable: true}
                finished_at: {type: string, format: date-time, nullable: true}
            Activity:
              type: object
              required: [webhooks, delivered, failed, expired, dead_token, skipped]
              properties:
                webhooks: {type: integer, description: Webhooks accepted.}
                delivered: {type: integer}
                failed: {type: integer}
                expired: {type: integer}
                dead_token: {type: integer}
                skipped: {type: integer}
            AppOverview:
              type: object
              required: [app, minutes, last_hour, queue, zendesk_backlog, events_backlog]
              properties:
                app: {type: string}
                minutes:
                  type: array
                  description: The last 60 minutes, oldest first, the current (partial) minute last; every instance's counts summed.
                  items:
                    allOf:
                      - {$ref: "#/components/schemas/Activity"}
                      - type: object
                        required: [minute]
                        properties:
                          minute: {type: string, format: date-time}
                last_hour: {$ref: "#/components/schemas/Activity"}
                queue:
                  type: object
                  required: [pending, sending, retrying]
                  properties:
                    pending: {type: integer, description: Waiting for a first attempt.}
                    sending: {type: integer, description: Claimed by an instance and being sent.}
                    retrying: {type: integer, description: Waiting for another attempt.}
                zendesk_backlog: {type: integer, description: Dead tokens not yet forwarded to Zendesk.}
                events_backlog: {type: integer, description: Feedback events not yet accepted by the app's receiver.}
            AppView:
              type: object
              required: [id, webhook_secrets, credentials]
              properties:
                id: {type: string}
                webhook_secrets: {type: array, items: {type: string}, description: "Each secret's first 4 characters and an ellipsis."}
                webhook_signing_secret: {type: string, nullable: true}
                user_tokens: {type: object, nullable: true, additionalProperties: {type: string}}
                apns: {type: object, nullable: true, additionalProperties: {type: string}}
                fcm: {type: object, nullable: true, additionalProperties: {type: string}}
                zendesk: {type: object, nullable: true, additionalProperties: {type: string}}
                events:
                  type: object
                  nullable: true
                  required: [url, signing_secret_file, types]
                  properties:
                    url: {type: string}
                    signing_secret_file: {type: string}
                    types: {type: array, items: {type: string}}
                credentials:
                  type: array
                  items:
                    type: object
                    required: [platform, kind]
                    properties:
                      platform: {type: string, enum: [ios, android]}
                      kind: {type: string, enum: [token, certificate, service_account]}
                      name: {type: string, nullable: true}
                      last_refresh: {type: string, format: date-time, nullable: true}
                      expires_at: {type: string, format: date-time, nullable: true}
                      last_rejection:
                        type: object
                        nullable: true
                        required: [at, reason]
                        properties:
                          at: {type: string, format: date-time}
                          reason: {type: string}
            Unread:
              type: object
              required: [total, tickets]
              properties:
                total: {type: integer, description: "Unread replies over all tickets: the app badge."}
                tickets:
                  type: array
                  items:
                    type: object
                    required: [ticket_id, unread]
                    properties:
                      ticket_id: {type: string}
                      unread: {type: integer}
            ReadRequest:
              type: object
              properties:
                device:
                  type: string
                  nullable: true
                  pattern: "^[!-~]{1,1024}$"
                  description: "The device token the ticket was read on; it gets no badge update. Absent or null: none."
                up_to_notification_id:
                  type: integer
                  format: int64
                  minimum: 1
                  nullable: true
                  description: >-
                    The newest notification the reader saw (a webhook's 202 gives its notification_id): only
                    notifications up to it are cleared, and later ones stay counted. Absent or null: all of them.
            ReadResult:
              type: object
              required: [total, synced_devices]
              properties:
                total: {type: integer}
                synced_devices: {type: integer}
            DeliveryStatus:
              type: object
              description: One delivery (one push to one device) and what became of it.
              required: [id, notification_id, ticket_id, token, platform, kind, status, attempts, last_reason, provider_id, created_at, updated_at, delivered_at]
              properties:
                id: {type: integer, format: int64}
                notification_id: {type: integer, format: int64, nullable: true, description: "null for a badge sync, which belongs to no notification."}
                ticket_id: {type: string, nullable: true}
                token:
                  type: string
                  description: >-
                    The device token shortened as in logs (first 6 and last 4 characters around "…"), or whole with
                    tokens=full.
                platform: {type: string, enum: [ios, android]}
                kind: {type: string, enum: [alert, badge_sync]}
                status:
                  type: string
                  enum: [pending, sending, delivered, failed, expired, skipped, dead_token]
                  description: >-
                    pending (waiting, new or to be retried), sending (claimed by an instance), delivered (accepted by
                    APNs or FCM), failed (refused for good, or the request could not be built), expired (out of
                    attempts or too old), skipped (the device was invalidated or unregistered first), dead_token (the
                    provider reported the token dead).
                attempts: {type: integer}
                last_reason: {type: string, nullable: true, description: "The provider's reason (BadDeviceToken, UNREGISTERED …) or the relay's."}
                provider_id: {type: string, nullable: true, description: "The apns-id, or the FCM message name, of a delivered push."}
                created_at: {type: string, format: date-time}
                updated_at: {type: string, format: date-time}
                delivered_at: {type: string, format: date-time, nullable: true}
            NotificationStatus:
              type: object
              description: One accepted webhook and how many of its deliveries are in each status.
              required: [id, ticket_id, title, created_at, counts]
              properties:
                id: {type: integer, format: int64}
                ticket_id: {type: string}
                title: {type: string}
                created_at: {type: string, format: date-time}
                counts:
                  type: object
                  required: [pending, sending, delivered, failed, expired, skipped, dead_token]
                  properties:
                    pending: {type: integer}
                    sending: {type: integer}
                    delivered: {type: integer}
                    failed: {type: integer}
                    expired: {type: integer}
                    skipped: {type: integer}
                    dead_token: {type: integer}
                deliveries:
                  type: array
                  description: Present when one notification is asked for (at most 1000, oldest first).
                  items: {$ref: "#/components/schemas/DeliveryStatus"}
            Error:
              type: object
              required: [error]
              properties:
                error:
                  type: object
                  required: [code, message]
                  properties:
                    code: {type: string, example: invalid_field}
                    message: {type: string}
            Device:
              type: object
              required: [app_id, token, platform, status, created_at, updated_at]
              properties:
                app_id: {type: string}
                token: {type: string}
                platform: {type: string, enum: [ios, android]}
                user_id: {type: string, nullable: true}
                environment: {type: string, enum: [production, sandbox], nullable: true}
                locale: {type: string, nullable: true}
                status: {type: string, enum: [active, invalid]}
                invalid_reason: {type: string, nullable: true}
                created_at: {type: string, format: date-time}
                updated_at: {type: string, format: date-time}
            DeviceRegistration:
              type: object
              required: [platform]
              description: Optional fields may be absent or null. With a user JWT, user_id defaults to its sub.
              properties:
                platform: {type: string, enum: [ios, android]}
                user_id: {type: string, nullable: true, minLength: 1, maxLength: 256, pattern: '^[^\x00-\x1F\x7F-\x9F]+$', description: "1-256 bytes (UTF-8), no control character."}
                environment: {type: string, nullable: true, enum: [production, sandbox, null]}
                locale: {type: string, nullable: true, pattern: "^[A-Za-z0-9_-]{1,35}$", description: "A language tag (pt-BR) or POSIX locale (pt_BR)."}
            ZendeskWebhook:
              type: object
              required: [devices, notification]
              properties:
                devices:
                  type: array
                  minItems: 1
                  maxItems: 1000
                  description: At most webhooks.max_devices (1000 by default); duplicates count once.
                  items:
                    type: object
                    required: [identifier, type]
                    properties:
                      identifier: {$ref: "#/components/schemas/Token"}
                      type: {type: string, enum: [ios, android]}
                notification:
                  type: object
                  required: [title, body, ticket_id]
                  properties:
                    title: {type: string, pattern: '^[^\x00]*$', description: Any text without U+0000.}
                    body: {type: string, pattern: '^[^\x00]*$', description: Any text without U+0000.}
                    ticket_id: {$ref: "#/components/schemas/TicketID"}
          responses:
            Error:
              description: An error.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
          links:
            # From a registered device (the PUT's 200 and 201 bodies).
            GetDevice:
              operationId: getDevice
              parameters: {app: "$request.path.app", token: "$response.body#/token"}
            UnregisterDevice:
              operationId: unregisterDevice
              parameters: {app: "$request.path.app", token: "$response.body#/token"}
            ListUserDevices:
              operationId: listUserDevices
              description: The devices of the user the device is linked to.
              parameters: {app: "$request.path.app", user: "$response.body#/user_id"}
            GetUnread:
              operationId: getUnread
              description: The counts of the user the device is linked to.
              parameters: {app: "$request.path.app", user: "$response.body#/user_id"}
        paths:
          /health:
            get:
              operationId: health
              summary: Liveness; 200 while the process serves HTTP.
              responses:
                "200":
                  description: Alive.
                  content:
                    application/json:
                      schema: {type: object, required: [status], properties: {status: {type: string, enum: [ok]}}}
          /ready:
            get:
              operationId: ready
              summary: Readiness; 200 when PostgreSQL answers and the schema is current.
              responses:
                "200":
                  description: Ready.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [status, schema_version, expected_schema_version]
                        properties:
                          status: {type: string, enum: [ready]}
                          schema_version: {type: integer}
                          expected_schema_version: {type: integer}
                "503":
                  description: database_unavailable or migrations_pending.
                  headers:
                    Retry-After: {schema: {type: integer}}
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Error"}
          /openapi.yaml:
            get:
              operationId: openapi
              summary: This document.
              responses:
                "200":
                  description: OpenAPI 3 document.
                  content:
                    application/yaml:
                      schema: {type: object, required: [openapi, info, paths]}
          /v1/webhooks/zendesk/{app}/{secret}:
            post:
              operationId: receiveZendeskWebhook
              summary: Zendesk Support SDK push webhook; stored durably before it is acknowledged.
              description: >-
                Unknown app and wrong secret both answer 404 with the same body. Apps with a
                webhook_signing_secret require X-Zendesk-Webhook-Signature and
                X-Zendesk-Webhook-Signature-Timestamp. Devices not yet registered are registered
                implicitly; devices marked invalid are skipped. A body with no Content-Type is read as
                JSON; another type than application/json is a 415, a body over 1 MiB a 413.
              parameters:
                - $ref: "#/components/parameters/app"
                - name: secret
                  in: path
                  required: true
                  description: One of the app's webhook_secrets (16-256 characters of A-Z a-z 0-9 - _ . ~); any other is a 404.
                  schema: {type: string}
                - name: X-Zendesk-Webhook-Signature
                  in: header
                  required: false
                  description: base64(HMAC-SHA256(webhook_signing_secret, timestamp + body)); read only when the app has a signing secret.
                  schema: {type: string}
                - name: X-Zendesk-Webhook-Signature-Timestamp
                  in: header
                  required: false
                  description: ISO 8601 or Unix seconds; read only when the app has a signing secret.
                  schema: {type: string}
              requestBody:
                required: true
                content:
                  application/json:
                    schema: {$ref: "#/components/schemas/ZendeskWebhook"}
              responses:
                "202":
                  description: Committed to the outbox.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [notification_id, deliveries, skipped]
                        properties:
                          notification_id: {type: integer, format: int64}
                          deliveries: {type: integer}
                          skipped: {type: integer}
                  links:
                    GetNotificationStatus:
                      operationId: getNotificationStatus
                      description: What became of this notification's pushes.
                      parameters:
                        app: "$request.path.app"
                        id: "$response.body#/notification_id"
                    GetFirstDevice:
                      operationId: getDevice
                      description: The webhook's first device is in the registry now (registered implicitly when it was not).
                      parameters:
                        app: "$request.path.app"
                        token: "$request.body#/devices/0/identifier"
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
                "503": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/devices/{token}:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/token"
            put:
              operationId: registerDevice
              summary: Register or update a device (upsert); revives an invalidated token.
              description: >-
                An iOS device's token must be an APNs token (hex of even length, 32-200 characters); anything else is a 400.
                When an existing device changes owner (its user_id changes, or it gains or loses one; a device without a user is
                owned by its token), it gets one silent badge update with the new owner's unread total (0 when none), so it stops
                showing the previous owner's badge.
              security: [{bearer: []}]
              requestBody:
                required: true
                content:
                  application/json:
                    schema: {$ref: "#/components/schemas/DeviceRegistration"}
              responses:
                "200":
                  description: Updated.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Device"}
                  links:
                    GetDevice: {$ref: "#/components/links/GetDevice"}
                    UnregisterDevice: {$ref: "#/components/links/UnregisterDevice"}
                    ListUserDevices: {$ref: "#/components/links/ListUserDevices"}
                    GetUnread: {$ref: "#/components/links/GetUnread"}
                "201":
                  description: Created.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Device"}
                  links:
                    GetDevice: {$ref: "#/components/links/GetDevice"}
                    UnregisterDevice: {$ref: "#/components/links/UnregisterDevice"}
                    ListUserDevices: {$ref: "#/components/links/ListUserDevices"}
                    GetUnread: {$ref: "#/components/links/GetUnread"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
            get:
              operationId: getDevice
              summary: Read one device.
              security: [{bearer: []}]
              responses:
                "200":
                  description: The device.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Device"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
            delete:
              operationId: unregisterDevice
              summary: Unregister a device; 204 whether or not it existed.
              security: [{bearer: []}]
              responses:
                "204": {description: Gone.}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/devices:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
            get:
              operationId: listUserDevices
              summary: The devices linked to a user.
              security: [{bearer: []}]
              responses:
                "200":
                  description: The devices.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [devices]
                        properties:
                          devices:
                            type: array
                            items: {$ref: "#/components/schemas/Device"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/unread:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
            get:
              operationId: getUnread
              summary: The user's unread replies, total (the badge) and per ticket. The user is a user id, or a device token for devices linked to no user.
              description: >-
                Answers with a strong ETag and Cache-Control "private, max-age=N" (unread.poll_after_seconds, 10 by default:
                poll again after N seconds). Send the ETag back in If-None-Match: an unchanged count answers 304 with no body,
                and with a user token the relay answers it without a database query while no change of the user was
                announced. A change made through another instance reaches the answer within the NOTIFY's delay (milliseconds);
                one made through this instance at once. Counts are not capped; display rules such as "99+" are the app's.
              security: [{bearer: []}]
              parameters:
                - {name: If-None-Match, in: header, required: false, schema: {type: string}}
              responses:
                "200":
                  description: The counts.
                  headers:
                    ETag: {schema: {type: string}}
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Unread"}
                "304":
                  description: Unchanged since the ETag given.
                  headers:
                    ETag: {schema: {type: string}}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/unread/stream:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
            get:
              operationId: streamUnread
              summary: "Live counts as Server-Sent Events: an `unread` event (data = the Unread object as JSON) on connect and after each change, `: heartbeat` comments in between."
              security: [{bearer: []}]
              responses:
                "200":
                  description: "The event stream; it ends when the client goes, the relay shuts down, `unread.stream_max_seconds` passed, or (at a heartbeat) the credential expired or was revoked."
                  content:
                    text/event-stream:
                      schema:
                        description: One event.
                        type: object
                        required: [event, data]
                        properties:
                          event: {type: string, enum: [unread]}
                          data: {type: string, description: The Unread object as JSON.}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "429":
                  description: "`too_many_streams`: the user, or the instance, has the most live streams allowed open; retry after `Retry-After` seconds, or poll. The connection is closed."
                  headers:
                    Retry-After: {schema: {type: integer}}
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Error"}
          /v1/apps/{app}/users/{user}/tickets/{ticket}/read:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
              - $ref: "#/components/parameters/ticket"
            post:
              operationId: readTicket
              summary: Clears one ticket's unread count and sends a silent badge update to the user's other active devices.
              security: [{bearer: []}]
              requestBody:
                required: false
                content:
                  application/json:
                    schema: {$ref: "#/components/schemas/ReadRequest"}
              responses:
                "200":
                  description: The new total and how many devices get a badge update.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/ReadResult"}
                  links:
                    GetUnread:
                      operationId: getUnread
                      parameters: {app: "$request.path.app", user: "$request.path.user"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/read-all:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
            post:
              operationId: readAll
              summary: Clears every ticket's unread count and sends a silent badge update to the user's other active devices.
              security: [{bearer: []}]
              requestBody:
                required: false
                content:
                  application/json:
                    schema: {$ref: "#/components/schemas/ReadRequest"}
              responses:
                "200":
                  description: The new total (0) and how many devices get a badge update.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/ReadResult"}
                  links:
                    GetUnread:
                      operationId: getUnread
                      parameters: {app: "$request.path.app", user: "$request.path.user"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/notifications/{id}:
            parameters:
              - $ref: "#/components/parameters/app"
              - name: id
                in: path
                required: true
                description: A notification id (a webhook's 202 gives it); an id that is not a positive integer names no notification (404).
                schema: {type: string}
                example: "1"
            get:
              operationId: getNotificationStatus
              summary: What became of one notification's pushes, device by device.
              description: App keys with notifications:read (their app only) and admin keys.
              security: [{bearer: []}]
              parameters:
                - $ref: "#/components/parameters/tokens"
              responses:
                "200":
                  description: The notification, its counts by status and its deliveries.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/NotificationStatus"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/tickets/{ticket}/notifications:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/ticket"
            get:
              operationId: listTicketNotifications
              summary: A ticket's latest notifications, newest first, with their counts by status.
              description: App keys with notifications:read (their app only) and admin keys. Keyset-paginated; next is null on the last page.
              security: [{bearer: []}]
              parameters:
                - $ref: "#/components/parameters/limit"
                - $ref: "#/components/parameters/cursor"
              responses:
                "200":
                  description: A page of notifications.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [notifications, next]
                        properties:
                          notifications:
                            type: array
                            items: {$ref: "#/components/schemas/NotificationStatus"}
                          next: {type: string, nullable: true}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/devices/{token}/deliveries:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/token"
            get:
              operationId: listDeviceDeliveries
              summary: The latest deliveries to one device, newest first (alerts and badge syncs).
              description: App keys with notifications:read (their app only) and admin keys. Keyset-paginated; next is null on the last page.
              security: [{bearer: []}]
              parameters:
                - $ref: "#/components/parameters/limit"
                - $ref: "#/components/parameters/cursor"
                - $ref: "#/components/parameters/tokens"
              responses:
                "200":
                  description: A page of deliveries.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [deliveries, next]
                        properties:
                          deliveries:
                            type: array
                            items: {$ref: "#/components/schemas/DeliveryStatus"}
                          next: {type: string, nullable: true}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /metrics:
            get:
              operationId: metrics
              summary: "Counters in Prometheus' text format: webhooks accepted, deliveries queued, push outcomes by app, platform and outcome, Zendesk forwarding, bulk-unregister counts."
              responses:
                "200":
                  description: The metrics.
                  content:
                    text/plain:
                      schema: {type: string}
          /v1/admin/apps/{app}/devices/bulk-unregister:
            parameters:
              - $ref: "#/components/parameters/app"
              - {name: propagate_to_zendesk, in: query, required: false, schema: {type: boolean}, description: For text uploads.}
            post:
              operationId: bulkUnregister
              summary: "Starts a background job removing tokens from the registry (admin key). JSON {tokens, propagate_to_zendesk}, or text/plain / text/csv with one token per line (millions of lines)."
              description: >-
                Text uploads: one token per line (LF or CRLF), blanks (space, tab) around it ignored,
                blank lines skipped; in CSV only the first field counts, with double quotes around it
                ignored, and a `token` header on line 1 is skipped. At least one token; a line that is
                not a token is a 400 naming it, and nothing is stored. JSON uploads are at most 64 MiB,
                text and CSV uploads at most `jobs.max_upload_bytes` (256 MiB by default): a larger one
                is a 413 `payload_too_large`, and nothing is stored. The upload is read to its end
                before the job is stored, so the 202 comes once all of it has arrived.
              security: [{bearer: []}]
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [tokens]
                      properties:
                        tokens: {type: array, minItems: 1, items: {$ref: "#/components/schemas/Token"}}
                        propagate_to_zendesk: {type: boolean, nullable: true, description: "Absent or null: false."}
                  text/plain:
                    schema:
                      type: string
                      pattern: '^([ \t]*\r?\n)*[ \t]*[!-~]{1,1024}[ \t]*\r?(\n([ \t]*([!-~]{1,1024}[ \t]*)?)\r?)*$'
                  text/csv:
                    schema:
                      type: string
                      pattern: '^([ \t"]*(,[^\n]*|\r?)\n)*[ \t"]*[!#-+\--~]([!-+\--~]{0,1022}[!#-+\--~])?[ \t"]*(,[^\n]*|\r?)(\n([ \t"]*([!#-+\--~]([!-+\--~]{0,1022}[!#-+\--~])?[ \t"]*)?(,[^\n]*|\r?)))*$'
              responses:
                "202":
                  description: The job is queued.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [job_id, total]
                        properties:
                          job_id: {type: string, format: uuid}
                          total: {type: integer}
                  links:
                    GetJob:
                      operationId: getJob
                      parameters: {id: "$response.body#/job_id"}
                    CancelJob:
                      operationId: cancelJob
                      parameters: {id: "$response.body#/job_id"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
          /v1/overview:
            get:
              operationId: getOverview
              summary: >-
                Per app, activity over the last hour (per minute), queue depth and backlogs. An
                admin key sees every app; an app key its own.
              security: [{bearer: []}]
              responses:
                "200":
                  description: The overview.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [generated_at, count_cap, apps]
                        properties:
                          generated_at: {type: string, format: date-time}
                          count_cap: {type: integer, description: Queue and backlog counts stop at this value.}
                          apps: {type: array, items: {$ref: "#/components/schemas/AppOverview"}}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
          /v1/apps:
            get:
              operationId: listApps
              summary: >-
                Each app's configuration as loaded, secrets shortened to a prefix, and the state of its
                provider credentials. An admin key sees every app; an app key its own.
              security: [{bearer: []}]
              responses:
                "200":
                  description: The apps.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [apps]
                        properties:
                          apps: {type: array, items: {$ref: "#/components/schemas/AppView"}}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs:
            get:
              operationId: listJobs
              summary: Recent jobs, newest first (admin key).
              security: [{bearer: []}]
              parameters:
                - {name: limit, in: query, required: false, schema: {type: integer, default: 50, minimum: 1, maximum: 500}}
                - {name: app, in: query, required: false, description: "Only this app's jobs; 1-256 bytes (UTF-8), no control character.", schema: {type: string, minLength: 1, maxLength: 256, pattern: '^[^\x00-\x1F\x7F-\x9F]+$'}}
              responses:
                "200":
                  description: The jobs.
                  content:
                    application/json:
                      schema:
                        type: object
                        required: [jobs]
                        properties:
                          jobs: {type: array, items: {$ref: "#/components/schemas/Job"}}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs/{id}:
            parameters:
              - $ref: "#/components/parameters/job"
            get:
              operationId: getJob
              summary: One job's status and counts (admin key).
              security: [{bearer: []}]
              responses:
                "200":
                  description: The job.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Job"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs/{id}/cancel:
            parameters:
              - $ref: "#/components/parameters/job"
            post:
              operationId: cancelJob
              summary: Cancels a queued or running job; a finished job is returned unchanged (admin key).
              security: [{bearer: []}]
              responses:
                "200":
                  description: The job after the request.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Job"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
        """#
}
