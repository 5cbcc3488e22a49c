// Jinja source to trees (jinja_syntax.hpp): the text is cut at its tags
// (whitespace control, trim_blocks and lstrip_blocks applied), each tag's
// inside is cut into tokens, and statements and expressions are parsed by
// recursive descent with Jinja's precedence (or < and < not < comparisons
// < ~ < + - < * / // % < ** < unary minus < filters, tests, subscripts).
#include "levers/core/error.hpp"
#include "levers/data/jinja/syntax.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace levers::data::jinja {

namespace {

struct Token {
    enum class Kind { name, number, string, op, end };
    Kind kind = Kind::end;
    std::string text;  // a name, an operator, a string's decoded value, a number's spelling
    int line = 1;
};

// One piece of the template: text, or a tag's inside with its kind ('{' for {{ }}, '%' for {% %}).
struct Piece {
    char kind;
    std::string text;
    int line;
};

[[noreturn]] void refuse(const std::string& name, int line, const std::string& what) {
    LEVERS_FAIL("{}, line {}: {}", name, line, what);
}

int lines_in(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Where the tag opened at `from` (just past its opening and any '-' or '+')
// closes: the index of its closing "}}", "%}" or "#}" ('-' before it included).
std::size_t tag_end(std::string_view src, std::size_t from, char kind) {
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    if (kind == '#') return src.find(close, from);
    char quote = 0;
    for (std::size_t i = from; i + 1 < src.size(); ++i) {
        const char c = src[i];
        if (quote) {
            if (c == '\\') ++i;
            else if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
            quote = c;
        } else if (src.compare(i, 2, close) == 0) {
            return i;
        }
    }
    return std::string_view::npos;
}

std::vector<Piece> cut(std::string_view src, const std::string& name) {
    std::vector<Piece> out;
    std::size_t pos = 0;
    int line = 1;
    bool strip_next = false, trim_next = false;  // the next text: every leading space (-), or one newline (trim_blocks)
    const auto add_text = [&](std::string text) {
        if (strip_next) {
            std::size_t i = 0;
            while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
            text.erase(0, i);
        } else if (trim_next) {
            if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
            else if (text.rfind('\n', 0) == 0) text.erase(0, 1);
        }
        strip_next = trim_next = false;
        out.push_back({'t', std::move(text), line});
    };
    while (pos <= src.size()) {
        std::size_t at = pos;
        char kind = 0;
        while ((at = src.find('{', at)) != std::string_view::npos) {
            if (at + 1 < src.size() && (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#')) {
                kind = src[at + 1];
                break;
            }
            ++at;
        }
        if (!kind) {
            add_text(std::string(src.substr(pos)));
            break;
        }
        std::string text(src.substr(pos, at - pos));
        const int text_lines = lines_in(text);
        std::size_t inner = at + 2;
        const char mark = inner < src.size() ? src[inner] : 0;
        if (mark == '-') {
            while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
        } else if (kind != '{' && mark != '+') {
            // lstrip_blocks: spaces and tabs between a line's start (in the source) and a block tag go.
            std::size_t j = at;
            while (j > pos && (src[j - 1] == ' ' || src[j - 1] == '\t')) --j;
            if (j == 0 || src[j - 1] == '\n') text.erase(j - pos);
        }
        if (mark == '-' || mark == '+') ++inner;
        add_text(std::move(text));
        line += text_lines;
        const std::size_t end = tag_end(src, inner, kind);
        if (end == std::string_view::npos)
            refuse(name, line, fmt::format("a tag opened with '{{{}' is never closed", kind));
        std::size_t content_end = end;
        if (content_end > inner && src[content_end - 1] == '-') {
            strip_next = true;
            --content_end;
        } else if (kind != '{') {
            trim_next = true;  // trim_blocks
        }
        if (kind != '#') out.push_back({kind, std::string(src.substr(inner, content_end - inner)), line});
        line += lines_in(src.substr(at, end + 2 - at));
        pos = end + 2;
    }
    return out;
}

std::vector<Token> tokenize(const std::string& s, int line, const std::string& name) {
    std::vector<Token> out;
    std::size_t i = 0;
    static const std::vector<std::string> ops = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                                 "<",  ">",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":",
                                                 "|",  "~",  "="};
    while (i < s.size()) {
        const char c = s[i];
        if (c == '\n') ++line;
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
            out.push_back({Token::Kind::name, s.substr(i, j - i), line});
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            std::size_t j = i;
            while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.' || s[j] == '_')) {
                if (s[j] == '.' && (j + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[j + 1])))) break;
                ++j;
            }
            out.push_back({Token::Kind::number, s.substr(i, j - i), line});
            i = j;
        } else if (c == '\'' || c == '"') {
            std::string value;
            std::size_t j = i + 1;
            for (; j < s.size() && s[j] != c; ++j) {
                if (s[j] != '\\' || j + 1 >= s.size()) {
                    value += s[j];
                    continue;
                }
                const char e = s[++j];
                switch (e) {
                    case 'n': value += '\n'; break;
                    case 't': value += '\t'; break;
                    case 'r': value += '\r'; break;
                    case '\\': value += '\\'; break;
                    case '\'': value += '\''; break;
                    case '"': value += '"'; break;
                    case '\n': break;
                    default: value += '\\', value += e;  // Python keeps unknown escapes as written
                }
            }
            if (j >= s.size()) refuse(name, line, "a string is never closed");
            out.push_back({Token::Kind::string, value, line});
            i = j + 1;
        } else {
            bool found = false;
            for (const std::string& op : ops)
                if (s.compare(i, op.size(), op) == 0) {
                    out.push_back({Token::Kind::op, op, line});
                    i += op.size();
                    found = true;
                    break;
                }
            if (!found) refuse(name, line, fmt::format("unexpected character '{}'", c));
        }
    }
    out.push_back({Token::Kind::end, "", line});
    return out;
}

// Recursive descent over one tag's tokens.
class Parser {
public:
    Parser(std::vector<Token> tokens, const std::string& name) : t_(std::move(tokens)), name_(name) {}

    const Token& peek(std::size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
    bool at_end() const { return peek().kind == Token::Kind::end; }
    bool is_op(const char* op, std::size_t ahead = 0) const {
        return peek(ahead).kind == Token::Kind::op && peek(ahead).text == op;
    }
    bool is_name(const char* n, std::size_t ahead = 0) const {
        return peek(ahead).kind == Token::Kind::name && peek(ahead).text == n;
    }
    Token next() { return t_[std::min(i_++, t_.size() - 1)]; }
    [[noreturn]] void fail(const std::string& what) const { refuse(name_, peek().line, what); }
    void expect_op(const char* op) {
        if (!is_op(op)) fail(fmt::format("expected '{}', found {}", op, shown(peek())));
        ++i_;
    }
    std::string expect_name() {
        if (peek().kind != Token::Kind::name) fail(fmt::format("expected a name, found {}", shown(peek())));
        return next().text;
    }
    void expect_end() {
        if (!at_end()) fail(fmt::format("unexpected {}", shown(peek())));
    }
    static std::string shown(const Token& t) {
        return t.kind == Token::Kind::end ? "the end of the tag" : "'" + t.text + "'";
    }

    // A loop's iterable: no `x if c else y` (its `if` filters the loop).
    ExprPtr iterable() { return or_expr(); }

    ExprPtr expression() {
        ExprPtr e = or_expr();
        if (is_name("if")) {
            ++i_;
            auto c = make(Expr::Kind::condition);
            c->args.push_back(std::move(e));
            c->args.push_back(or_expr());
            if (is_name("else")) {
                ++i_;
                c->args.push_back(expression());
            } else {
                c->args.push_back(nullptr);
            }
            return c;
        }
        return e;
    }

private:
    ExprPtr make(Expr::Kind kind, std::string name = {}) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = peek().line;
        e->name = std::move(name);
        return e;
    }
    ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
        auto e = make(Expr::Kind::binary, std::move(op));
        e->args.push_back(std::move(a));
        e->args.push_back(std::move(b));
        return e;
    }
    ExprPtr or_expr() {
        ExprPtr e = and_expr();
        while (is_name("or")) {
            ++i_;
            e = binary("or", std::move(e), and_expr());
        }
        return e;
    }
    ExprPtr and_expr() {
        ExprPtr e = not_expr();
        while (is_name("and")) {
            ++i_;
            e = binary("and", std::move(e), not_expr());
        }
        return e;
    }
    ExprPtr not_expr() {
        if (is_name("not")) {
            ++i_;
            auto e = make(Expr::Kind::unary, "not");
            e->args.push_back(not_expr());
            return e;
        }
        return compare();
    }
    ExprPtr compare() {
        ExprPtr e = concat();
        for (;;) {
            std::string op;
            if (peek().kind == Token::Kind::op &&
                std::set<std::string>{"==", "!=", "<", ">", "<=", ">="}.count(peek().text))
                op = next().text;
            else if (is_name("in"))
                op = next().text;
            else if (is_name("not") && is_name("in", 1)) {
                i_ += 2;
                op = "not in";
            } else
                return e;
            e = binary(op, std::move(e), concat());
        }
    }
    ExprPtr concat() {
        ExprPtr e = sum();
        while (is_op("~")) {
            ++i_;
            e = binary("~", std::move(e), sum());
        }
        return e;
    }
    ExprPtr sum() {
        ExprPtr e = product();
        while (is_op("+") || is_op("-")) {
            const std::string op = next().text;
            e = binary(op, std::move(e), product());
        }
        return e;
    }
    ExprPtr product() {
        ExprPtr e = power();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const std::string op = next().text;
            e = binary(op, std::move(e), power());
        }
        return e;
    }
    ExprPtr power() {
        ExprPtr e = unary();
        while (is_op("**")) {
            ++i_;
            e = binary("**", std::move(e), unary());
        }
        return e;
    }
    ExprPtr unary() {
        if (is_op("-") || is_op("+")) {
            const std::string op = next().text;
            ExprPtr operand = unary();
            if (op == "+") return operand;
            auto e = make(Expr::Kind::unary, "-");
            e->args.push_back(std::move(operand));
            return e;
        }
        return filtered(postfix(primary()));
    }
    // Arguments of a call, filter or test: positional, then name=value.
    void arguments(Expr& e) {
        expect_op("(");
        while (!is_op(")")) {
            if (peek().kind == Token::Kind::name && is_op("=", 1)) {
                std::string key = next().text;
                ++i_;
                e.kwargs.emplace_back(std::move(key), expression());
            } else {
                e.args.push_back(expression());
            }
            if (!is_op(",")) break;
            ++i_;
        }
        expect_op(")");
    }
    ExprPtr postfix(ExprPtr e) {
        for (;;) {
            if (is_op(".")) {
                ++i_;
                auto a = make(Expr::Kind::attribute, expect_name());
                a->args.push_back(std::move(e));
                e = std::move(a);
            } else if (is_op("[")) {
                ++i_;
                ExprPtr parts[3];
                bool sliced = false;
                for (int k = 0; k < 3; ++k) {
                    if (!is_op(":") && !is_op("]")) parts[k] = expression();
                    if (k < 2 && is_op(":")) {
                        ++i_;
                        sliced = true;
                    } else {
                        break;
                    }
                }
                expect_op("]");
                auto s = make(sliced ? Expr::Kind::slice : Expr::Kind::index);
                s->args.push_back(std::move(e));
                if (!sliced && !parts[0]) fail("an empty subscript []");
                for (int k = 0; k < (sliced ? 3 : 1); ++k) s->args.push_back(std::move(parts[k]));
                e = std::move(s);
            } else if (is_op("(")) {
                auto c = make(Expr::Kind::call);
                c->args.push_back(std::move(e));
                arguments(*c);
                e = std::move(c);
            } else {
                return e;
            }
        }
    }
    ExprPtr filtered(ExprPtr e) {
        for (;;) {
            if (is_op("|")) {
                ++i_;
                auto f = make(Expr::Kind::filter, expect_name());
                f->args.push_back(std::move(e));
                if (is_op("(")) arguments(*f);
                e = std::move(f);
            } else if (is_name("is")) {
                ++i_;
                auto t = make(Expr::Kind::test);
                if (is_name("not")) {
                    ++i_;
                    t->negated = true;
                }
                // Tests named like keywords: none, true, false.
                t->name = expect_name();
                t->args.push_back(std::move(e));
                if (is_op("(")) {
                    arguments(*t);
                } else if (peek().kind == Token::Kind::string || peek().kind == Token::Kind::number ||
                           (peek().kind == Token::Kind::name && !is_name("and") && !is_name("or") &&
                            !is_name("else") && !is_name("if") && !is_name("in") && !is_name("not") &&
                            !is_name("is"))) {
                    t->args.push_back(primary());  // `is sameas x`, `is divisibleby 3`
                }
                e = std::move(t);
            } else {
                return e;
            }
        }
    }
    ExprPtr primary() {
        const Token tok = peek();
        if (tok.kind == Token::Kind::string) {
            ++i_;
            auto e = make(Expr::Kind::literal);
            e->value = tok.text;
            while (peek().kind == Token::Kind::string) e->value = e->value.get<std::string>() + next().text;  // 'a' 'b'
            return e;
        }
        if (tok.kind == Token::Kind::number) {
            ++i_;
            auto e = make(Expr::Kind::literal);
            std::string digits;
            for (char c : tok.text)
                if (c != '_') digits += c;
            if (digits.find('.') != std::string::npos) e->value = std::stod(digits);
            else e->value = std::stoll(digits);
            return e;
        }
        if (tok.kind == Token::Kind::name) {
            ++i_;
            auto e = make(Expr::Kind::literal);
            if (tok.text == "true" || tok.text == "True") e->value = true;
            else if (tok.text == "false" || tok.text == "False") e->value = false;
            else if (tok.text == "none" || tok.text == "None") e->value = nullptr;
            else {
                e->kind = Expr::Kind::name;
                e->name = tok.text;
            }
            return e;
        }
        if (is_op("(")) {
            ++i_;
            ExprPtr first = expression();
            if (is_op(",")) {  // a tuple, kept as a list
                auto l = make(Expr::Kind::list);
                l->args.push_back(std::move(first));
                while (is_op(",")) {
                    ++i_;
                    if (is_op(")")) break;
                    l->args.push_back(expression());
                }
                expect_op(")");
                return l;
            }
            expect_op(")");
            return first;
        }
        if (is_op("[")) {
            ++i_;
            auto l = make(Expr::Kind::list);
            while (!is_op("]")) {
                l->args.push_back(expression());
                if (!is_op(",")) break;
                ++i_;
            }
            expect_op("]");
            return l;
        }
        if (is_op("{")) {
            ++i_;
            auto d = make(Expr::Kind::dict);
            while (!is_op("}")) {
                d->args.push_back(expression());
                expect_op(":");
                d->args.push_back(expression());
                if (!is_op(",")) break;
                ++i_;
            }
            expect_op("}");
            return d;
        }
        fail(fmt::format("unexpected {}", shown(tok)));
    }

    std::vector<Token> t_;
    std::size_t i_ = 0;
    const std::string& name_;
};

// Statements: the pieces in order, each block's body until its end tag.
class Builder {
public:
    Builder(std::vector<Piece> pieces, std::string name) : pieces_(std::move(pieces)), name_(std::move(name)) {}

    // Nodes until a {% %} whose first word is in `ends` (returned, its parser
    // positioned after the word), or the template's end (returns "").
    std::string body(Body& out, const std::set<std::string>& ends, std::unique_ptr<Parser>& tag) {
        while (at_ < pieces_.size()) {
            const Piece& p = pieces_[at_++];
            if (p.kind == 't') {
                if (p.text.empty()) continue;
                auto n = node(Node::Kind::text, p.line);
                n->text = p.text;
                out.push_back(std::move(n));
                continue;
            }
            auto parser = std::make_unique<Parser>(tokenize(p.text, p.line, name_), name_);
            if (p.kind == '{') {
                auto n = node(Node::Kind::output, p.line);
                n->expr = parser->expression();
                parser->expect_end();
                out.push_back(std::move(n));
                continue;
            }
            const std::string word = parser->expect_name();
            if (ends.count(word)) {
                tag = std::move(parser);
                return word;
            }
            statement(word, *parser, out, p.line);
        }
        return "";
    }

    Body all() {
        Body out;
        std::unique_ptr<Parser> tag;
        body(out, {}, tag);
        return out;
    }

private:
    NodePtr node(Node::Kind kind, int line) {
        auto n = std::make_unique<Node>();
        n->kind = kind;
        n->line = line;
        return n;
    }
    std::string closed(Body& out, const std::set<std::string>& ends, std::unique_ptr<Parser>& tag,
                       const char* opened, int line) {
        const std::string word = body(out, ends, tag);
        if (word.empty())
            refuse(name_, line, fmt::format("'{}' is never closed (expected {})", opened, *ends.rbegin()));
        return word;
    }
    void statement(const std::string& word, Parser& p, Body& out, int line) {
        std::unique_ptr<Parser> tag;
        if (word == "if") {
            auto n = node(Node::Kind::if_, line);
            ExprPtr condition = p.expression();
            p.expect_end();
            for (;;) {
                Body branch;
                const std::string end = closed(branch, {"elif", "else", "endif"}, tag, "if", line);
                n->branches.emplace_back(std::move(condition), std::move(branch));
                if (end == "endif") {
                    tag->expect_end();
                    break;
                }
                if (end == "elif") {
                    condition = tag->expression();
                } else {
                    condition = nullptr;
                    tag->expect_end();
                    Body last;
                    closed(last, {"endif"}, tag, "else", line);
                    tag->expect_end();
                    n->branches.emplace_back(nullptr, std::move(last));
                    break;
                }
                tag->expect_end();
            }
            out.push_back(std::move(n));
        } else if (word == "for") {
            auto n = node(Node::Kind::for_, line);
            n->targets.push_back(p.expect_name());
            while (p.is_op(",")) {
                p.next();
                n->targets.push_back(p.expect_name());
            }
            if (!p.is_name("in")) p.fail("expected 'in' after the loop's variables");
            p.next();
            n->expr = p.iterable();
            if (p.is_name("if")) {
                p.next();
                n->loop_filter = p.expression();
            }
            if (p.is_name("recursive")) p.fail("recursive loops are not supported");
            p.expect_end();
            const std::string end = closed(n->body, {"else", "endfor"}, tag, "for", line);
            tag->expect_end();
            if (end == "else") {
                closed(n->otherwise, {"endfor"}, tag, "for", line);
                tag->expect_end();
            }
            out.push_back(std::move(n));
        } else if (word == "set") {
            auto n = node(Node::Kind::set, line);
            n->targets.push_back(p.expect_name());
            if (p.is_op(".")) {
                p.next();
                n->attribute = p.expect_name();
            }
            if (!p.is_op("=")) p.fail("block assignments ({% set x %}...{% endset %}) are not supported");
            p.next();
            n->expr = p.expression();
            p.expect_end();
            out.push_back(std::move(n));
        } else if (word == "break" || word == "continue") {
            p.expect_end();
            out.push_back(node(word == "break" ? Node::Kind::break_ : Node::Kind::continue_, line));
        } else if (word == "generation") {
            // Hugging Face's marker of assistant text: rendered as its body.
            p.expect_end();
            closed(out, {"endgeneration"}, tag, "generation", line);
            tag->expect_end();
        } else {
            refuse(name_, line, fmt::format("'{{% {} %}}' is not supported (this engine knows if, for, set, break, "
                                            "continue and generation)", word));
        }
    }

    std::vector<Piece> pieces_;
    std::size_t at_ = 0;
    std::string name_;
};

}  // namespace

Program parse(std::string_view source, std::string name) {
    Program program;
    program.name = name;
    program.body = Builder(cut(source, name), name).all();
    return program;
}

}  // namespace levers::data::jinja
