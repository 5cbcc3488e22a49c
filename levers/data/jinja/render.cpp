// Renders a parsed template (jinja_syntax.hpp): statements in order, output
// appended; variables in scopes (the caller's at the bottom, one more per
// loop iteration, so a `set` inside a loop stays there, as in Jinja, and a
// namespace carries values out of it).
#include "levers/core/error.hpp"
#include "levers/data/jinja/jinja.hpp"
#include "levers/data/jinja/values.hpp"

#include <fmt/format.h>

#include <map>

namespace levers::data {

namespace jinja {
namespace {

enum class Flow { normal, broke, continued };

class Renderer {
public:
    Renderer(const Program& program, const Value& variables) : program_(program) {
        scopes_.emplace_back();
        for (const auto& [k, v] : variables.items()) scopes_.back()[k] = v;
    }

    std::string run() {
        if (execute(program_.body) != Flow::normal) refuse(1, "'break' or 'continue' outside a loop");
        return std::move(out_);
    }

private:
    [[noreturn]] void refuse(int line, const std::string& what) const {
        LEVERS_FAIL("{}, line {}: {}", program_.name, line, what);
    }

    Value* find(const std::string& name) {
        for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
            const auto it = s->find(name);
            if (it != s->end()) return &it->second;
        }
        return nullptr;
    }

    Flow execute(const Body& body) {
        for (const NodePtr& n : body) {
            const Flow f = execute(*n);
            if (f != Flow::normal) return f;
        }
        return Flow::normal;
    }

    Flow execute(const Node& n) {
        switch (n.kind) {
            case Node::Kind::text: out_ += n.text; return Flow::normal;
            case Node::Kind::output: out_ += str(eval(*n.expr)); return Flow::normal;
            case Node::Kind::break_: return Flow::broke;
            case Node::Kind::continue_: return Flow::continued;
            case Node::Kind::if_:
                for (const auto& [condition, body] : n.branches)
                    if (!condition || truthy(eval(*condition))) return execute(body);
                return Flow::normal;
            case Node::Kind::set: {
                Value value = eval(*n.expr);
                if (n.attribute.empty()) {
                    scopes_.back()[n.targets[0]] = std::move(value);
                } else {
                    Value* target = find(n.targets[0]);
                    if (!target || !is_namespace(*target))
                        refuse(n.line, fmt::format("'{}.{}' can be set only on a namespace()", n.targets[0], n.attribute));
                    (*target)[n.attribute] = std::move(value);
                }
                return Flow::normal;
            }
            case Node::Kind::for_: return loop(n);
        }
        return Flow::normal;
    }

    Flow loop(const Node& n) {
        std::vector<Value> items;
        try {
            const Value iterable = eval(*n.expr);
            if (iterable.is_object() && !is_namespace(iterable))
                for (const auto& [k, _] : iterable.items()) items.emplace_back(k);
            else if (iterable.is_array())
                items.assign(iterable.begin(), iterable.end());
            else if (iterable.is_string())
                for (const std::string& c : code_points(iterable.get<std::string>())) items.emplace_back(c);
            else if (!is_undefined(iterable))
                throw ValueError(fmt::format("{} is not iterable", type_name(iterable)));
        } catch (const ValueError& e) {
            refuse(n.line, e.what());
        }
        const auto bind = [&](std::map<std::string, Value>& scope, const Value& item) {
            if (n.targets.size() == 1) {
                scope[n.targets[0]] = item;
                return;
            }
            if (!item.is_array() || item.size() != n.targets.size())
                refuse(n.line, fmt::format("cannot unpack {} into {} loop variables", repr(item), n.targets.size()));
            for (std::size_t k = 0; k < n.targets.size(); ++k) scope[n.targets[k]] = item[k];
        };
        if (n.loop_filter) {  // `for x in xs if c`: loop.* counts what passes
            std::vector<Value> kept;
            for (const Value& item : items) {
                scopes_.emplace_back();
                bind(scopes_.back(), item);
                const bool keep = truthy(eval(*n.loop_filter));
                scopes_.pop_back();
                if (keep) kept.push_back(item);
            }
            items = std::move(kept);
        }
        const auto count = static_cast<long long>(items.size());
        for (long long i = 0; i < count; ++i) {
            scopes_.emplace_back();
            auto& scope = scopes_.back();
            bind(scope, items[static_cast<std::size_t>(i)]);
            Value info = {{"index", i + 1},          {"index0", i},           {"revindex", count - i},
                          {"revindex0", count - i - 1}, {"first", i == 0},     {"last", i == count - 1},
                          {"length", count}};
            info["previtem"] = i > 0 ? items[static_cast<std::size_t>(i - 1)] : undefined();
            info["nextitem"] = i + 1 < count ? items[static_cast<std::size_t>(i + 1)] : undefined();
            scope["loop"] = std::move(info);
            const Flow f = execute(n.body);
            scopes_.pop_back();
            if (f == Flow::broke) break;
        }
        if (count == 0) return execute(n.otherwise);
        return Flow::normal;
    }

    Arguments arguments(const Expr& e, std::size_t from) {
        Arguments a;
        for (std::size_t i = from; i < e.args.size(); ++i) a.positional.push_back(eval(*e.args[i]));
        for (const auto& [k, v] : e.kwargs) a.named.emplace_back(k, eval(*v));
        return a;
    }

    Value eval(const Expr& e) {
        try {
            return evaluate(e);
        } catch (const ValueError& error) {
            refuse(e.line, error.what());
        }
    }

    // Python's subscript of a list or string, negative from the end; undefined outside.
    static Value item_at(const Value& v, const Value& key) {
        if (v.is_object()) {
            if (!key.is_string()) return undefined();
            return v.contains(key.get<std::string>()) ? v.at(key.get<std::string>()) : undefined();
        }
        if (!key.is_number_integer()) {
            if (is_undefined(v)) return undefined();
            throw ValueError(fmt::format("{} indexed by {}", type_name(v), type_name(key)));
        }
        long long i = key.get<long long>();
        if (v.is_array() || v.is_string()) {
            const auto cps = v.is_string() ? code_points(v.get<std::string>()) : std::vector<std::string>{};
            const auto size = static_cast<long long>(v.is_array() ? v.size() : cps.size());
            if (i < 0) i += size;
            if (i < 0 || i >= size) return undefined();
            return v.is_array() ? v[static_cast<std::size_t>(i)] : Value(cps[static_cast<std::size_t>(i)]);
        }
        return undefined();
    }

    // Python's v[start:stop:step] of a list or string.
    static Value sliced(const Value& v, const Value& start, const Value& stop, const Value& step) {
        if (!v.is_array() && !v.is_string()) throw ValueError(fmt::format("a slice of {}", type_name(v)));
        const auto cps = v.is_string() ? code_points(v.get<std::string>()) : std::vector<std::string>{};
        const auto n = static_cast<long long>(v.is_array() ? v.size() : cps.size());
        const auto part = [](const Value& x, long long fallback) {
            if (x.is_null()) return fallback;
            if (!x.is_number_integer()) throw ValueError("slice bounds must be integers");
            return x.get<long long>();
        };
        const long long s = part(step, 1);
        if (s == 0) throw ValueError("a slice step of 0");
        const auto clamp = [&](long long i, long long low, long long high) {
            if (i < 0) i += n;
            return std::max(low, std::min(high, i));
        };
        long long a = start.is_null() ? (s > 0 ? 0 : n - 1) : clamp(part(start, 0), s > 0 ? 0 : -1, s > 0 ? n : n - 1);
        const long long b = stop.is_null() ? (s > 0 ? n : -1) : clamp(part(stop, 0), s > 0 ? 0 : -1, s > 0 ? n : n - 1);
        Value list = Value::array();
        std::string text;
        for (; s > 0 ? a < b : a > b; a += s) {
            if (v.is_array()) list.push_back(v[static_cast<std::size_t>(a)]);
            else text += cps[static_cast<std::size_t>(a)];
        }
        return v.is_array() ? list : Value(text);
    }

    Value evaluate(const Expr& e) {
        switch (e.kind) {
            case Expr::Kind::literal: return e.value;
            case Expr::Kind::name: {
                const Value* v = find(e.name);
                return v ? *v : undefined();
            }
            case Expr::Kind::list: {
                Value out = Value::array();
                for (const ExprPtr& x : e.args) out.push_back(eval(*x));
                return out;
            }
            case Expr::Kind::dict: {
                Value out = Value::object();
                for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
                    const Value key = eval(*e.args[i]);
                    if (!key.is_string()) throw ValueError("dict keys must be strings here");
                    out[key.get<std::string>()] = eval(*e.args[i + 1]);
                }
                return out;
            }
            case Expr::Kind::attribute: {
                const Value v = eval(*e.args[0]);
                if (v.is_object() && v.contains(e.name)) return v.at(e.name);
                return undefined();
            }
            case Expr::Kind::index: return item_at(eval(*e.args[0]), eval(*e.args[1]));
            case Expr::Kind::slice: {
                const auto part = [&](std::size_t k) { return e.args[k] ? eval(*e.args[k]) : Value(); };
                return sliced(eval(*e.args[0]), part(1), part(2), part(3));
            }
            case Expr::Kind::call: {
                const Expr& callee = *e.args[0];
                if (callee.kind == Expr::Kind::attribute)
                    return call_method(eval(*callee.args[0]), callee.name, arguments(e, 1));
                if (callee.kind == Expr::Kind::name && !find(callee.name) && is_global(callee.name))
                    return call_global(callee.name, arguments(e, 1));
                throw ValueError(callee.kind == Expr::Kind::name
                                     ? fmt::format("the function '{}' is not supported", callee.name)
                                     : std::string("only methods and the built-in functions can be called"));
            }
            case Expr::Kind::filter: return call_filter(e.name, eval(*e.args[0]), arguments(e, 1));
            case Expr::Kind::test: return call_test(e.name, eval(*e.args[0]), arguments(e, 1)) != e.negated;
            case Expr::Kind::unary: {
                const Value v = eval(*e.args[0]);
                if (e.name == "not") return !truthy(v);
                return arithmetic("-", Value(0), v);
            }
            case Expr::Kind::condition: {
                if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
                return e.args[2] ? eval(*e.args[2]) : undefined();
            }
            case Expr::Kind::binary: {
                const std::string& op = e.name;
                if (op == "and" || op == "or") {
                    Value a = eval(*e.args[0]);
                    if (truthy(a) == (op == "or")) return a;
                    return eval(*e.args[1]);
                }
                const Value a = eval(*e.args[0]), b = eval(*e.args[1]);
                if (op == "~") return str(a) + str(b);
                if (op == "in") return contains(b, a);
                if (op == "not in") return !contains(b, a);
                if (op == "==" || op == "!=" || op == "<" || op == ">" || op == "<=" || op == ">=")
                    return compare(op, a, b);
                return arithmetic(op, a, b);
            }
        }
        return undefined();
    }

    const Program& program_;
    std::vector<std::map<std::string, Value>> scopes_;
    std::string out_;
};

}  // namespace
}  // namespace jinja

JinjaTemplate::JinjaTemplate(std::string_view source, std::string name)
    : program_(std::make_shared<const jinja::Program>(jinja::parse(source, std::move(name)))) {}

std::string JinjaTemplate::render(const nlohmann::ordered_json& variables) const {
    LEVERS_CHECK(variables.is_object(), "{}: the variables must be a JSON object", program_->name);
    return jinja::Renderer(*program_, variables).run();
}

}  // namespace levers::data
