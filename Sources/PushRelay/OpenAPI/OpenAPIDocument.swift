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
            out. Every error response is {"error":{"code","message"}}.
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
          parameters:
            app:
              name: app
              in: path
              required: true
              schema: {type: string, pattern: "^[a-z0-9][a-z0-9_-]{0,63}$"}
            token:
              name: token
              in: path
              required: true
              description: "iOS: 32-200 hex characters (stored lower-case). Android: 1-4096 printable characters."
              schema: {type: string}
            user:
              name: user
              in: path
              required: true
              schema: {type: string}
          schemas:
            Job:
              type: object
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
                device: {type: string, description: "The device the ticket was read on; it gets no badge update."}
            ReadResult:
              type: object
              required: [total, synced_devices]
              properties:
                total: {type: integer}
                synced_devices: {type: integer}
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
              properties:
                platform: {type: string, enum: [ios, android]}
                user_id: {type: string, minLength: 1, maxLength: 256}
                environment: {type: string, enum: [production, sandbox]}
                locale: {type: string, minLength: 1, maxLength: 35}
            ZendeskWebhook:
              type: object
              required: [devices, notification]
              properties:
                devices:
                  type: array
                  minItems: 1
                  maxItems: 1000
                  items:
                    type: object
                    required: [identifier, type]
                    properties:
                      identifier: {type: string}
                      type: {type: string, enum: [ios, android]}
                notification:
                  type: object
                  required: [title, body, ticket_id]
                  properties:
                    title: {type: string}
                    body: {type: string}
                    ticket_id: {type: string, minLength: 1, maxLength: 255}
          responses:
            Error:
              description: An error.
              content:
                application/json:
                  schema: {$ref: "#/components/schemas/Error"}
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
                      schema: {type: object, properties: {status: {type: string, enum: [ok]}}}
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
                        properties:
                          status: {type: string, enum: [ready]}
                          schema_version: {type: integer}
                          expected_schema_version: {type: integer}
                "503": {$ref: "#/components/responses/Error"}
          /openapi.yaml:
            get:
              operationId: openapi
              summary: This document.
              responses:
                "200":
                  description: OpenAPI 3 document.
                  content:
                    application/yaml:
                      schema: {type: string}
          /v1/webhooks/zendesk/{app}/{secret}:
            post:
              operationId: receiveZendeskWebhook
              summary: Zendesk Support SDK push webhook; stored durably before it is acknowledged.
              description: >-
                Unknown app and wrong secret both answer 404 with the same body. Apps with a
                webhook_signing_secret require X-Zendesk-Webhook-Signature and
                X-Zendesk-Webhook-Signature-Timestamp. Devices not yet registered are registered
                implicitly; devices marked invalid are skipped.
              parameters:
                - $ref: "#/components/parameters/app"
                - name: secret
                  in: path
                  required: true
                  schema: {type: string}
                - name: X-Zendesk-Webhook-Signature
                  in: header
                  required: false
                  schema: {type: string}
                - name: X-Zendesk-Webhook-Signature-Timestamp
                  in: header
                  required: false
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
                "201":
                  description: Created.
                  content:
                    application/json:
                      schema: {$ref: "#/components/schemas/Device"}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
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
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
            delete:
              operationId: unregisterDevice
              summary: Unregister a device; 204 whether or not it existed.
              security: [{bearer: []}]
              responses:
                "204": {description: Gone.}
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
                        properties:
                          devices:
                            type: array
                            items: {$ref: "#/components/schemas/Device"}
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
              description: Answers with a strong ETag; send it back in If-None-Match and an unchanged count answers 304 with no body, so polling is cheap.
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
                "304": {description: Unchanged since the ETag given.}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/unread/stream:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
            get:
              operationId: streamUnread
              summary: "Live counts as Server-Sent Events: an `unread` event (data = the Unread object) on connect and after each change, `: heartbeat` comments in between."
              security: [{bearer: []}]
              responses:
                "200":
                  description: The event stream.
                  content:
                    text/event-stream:
                      schema: {type: string}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/apps/{app}/users/{user}/tickets/{ticket}/read:
            parameters:
              - $ref: "#/components/parameters/app"
              - $ref: "#/components/parameters/user"
              - {name: ticket, in: path, required: true, schema: {type: string}}
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
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
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
              summary: "Starts a background job removing tokens from the registry (admin key). JSON {tokens, propagate_to_zendesk}, or text/plain / text/csv with one token per line, streamed (millions of lines)."
              security: [{bearer: []}]
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      required: [tokens]
                      properties:
                        tokens: {type: array, items: {type: string}}
                        propagate_to_zendesk: {type: boolean}
                  text/plain:
                    schema: {type: string}
                  text/csv:
                    schema: {type: string}
              responses:
                "202":
                  description: The job is queued.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          job_id: {type: string, format: uuid}
                          total: {type: integer}
                "400": {$ref: "#/components/responses/Error"}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
                "413": {$ref: "#/components/responses/Error"}
                "415": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs:
            get:
              operationId: listJobs
              summary: Recent jobs, newest first (admin key).
              security: [{bearer: []}]
              parameters:
                - {name: limit, in: query, required: false, schema: {type: integer, default: 50, maximum: 500}}
                - {name: app, in: query, required: false, schema: {type: string}}
              responses:
                "200":
                  description: The jobs.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          jobs: {type: array, items: {$ref: "#/components/schemas/Job"}}
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs/{id}:
            parameters:
              - {name: id, in: path, required: true, schema: {type: string, format: uuid}}
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
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
          /v1/admin/jobs/{id}/cancel:
            parameters:
              - {name: id, in: path, required: true, schema: {type: string, format: uuid}}
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
                "401": {$ref: "#/components/responses/Error"}
                "403": {$ref: "#/components/responses/Error"}
                "404": {$ref: "#/components/responses/Error"}
        """#
}
