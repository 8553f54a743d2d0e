/// A coding key made from any name, for objects whose member names are data (`{"<name>":[…]}`).
struct NamedCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
