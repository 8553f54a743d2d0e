import HTTPTypes
import Hummingbird
import Synchronization

/// Forwards route registrations to a router and remembers each (method, path), so the OpenAPI
/// document can be checked against what is really served.
struct RouteRecorder<Context: RequestContext>: RouterMethods {
    let router: Router<Context>
    let recorded = Recorded()

    final class Recorded: Sendable {
        private let routes = Mutex<[Route]>([])
        func append(_ route: Route) { routes.withLock { $0.append(route) } }
        var all: [Route] { routes.withLock { $0 } }

        /// The methods of the routes whose pattern matches `path` (segments compared as the router
        /// splits them, a `{parameter}` matching any one segment), sorted.
        func methods(servingPath path: String) -> [String] {
            let segments = path.split(separator: "/")
            let methods = all.filter { route in
                let pattern = route.path.split(separator: "/")
                return pattern.count == segments.count
                    && zip(pattern, segments).allSatisfy { expected, actual in
                        (expected.first == "{" && expected.last == "}") || expected == actual
                    }
            }.map(\.method)
            return Set(methods).sorted()
        }
    }

    @discardableResult
    func on<Responder: HTTPResponder>(
        _ path: RouterPath,
        method: HTTPRequest.Method,
        responder: Responder
    ) -> RouteRecorder
    where Responder.Context == Context {
        recorded.append(Route(method: method.rawValue, path: path.description))
        router.on(path, method: method, responder: responder)
        return self
    }

    func add(middleware: any MiddlewareProtocol<Request, Response, Context>) -> RouteRecorder {
        router.add(middleware: middleware)
        return self
    }
}

/// A served route: `GET /v1/apps/{app}/devices/{token}`.
public struct Route: Sendable, Hashable, CustomStringConvertible {
    public var method: String
    public var path: String
    public var description: String { "\(method) \(path)" }
}
