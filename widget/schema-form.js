// Render a prompt's answer form from its JSON Schema:
// enum → buttons, boolean → Yes/No, string → text box, number → number box,
// object → a small form of those; no schema → text box. And say an answer back in words.
//
// Field order of an object: the engine stores schemas with their keys sorted, so the
// order of `properties` is lost. The form follows the schema's own "x-order" (an array of
// property names) when it has one, else the order of "required", then the other
// properties. Arrays keep their order through JSON, so either survives.

let counter = 0;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/** The property names of an object schema, in the order the form shows them. */
export function fieldOrder(schema) {
  const names = Object.keys(schema.properties || {});
  const order = [];
  const explicit = Array.isArray(schema["x-order"]) ? schema["x-order"] : [];
  for (const name of [...explicit, ...(schema.required || []), ...names]) {
    if (names.includes(name) && !order.includes(name)) order.push(name);
  }
  return order;
}

function choiceButtons(values, labels, submit) {
  const group = el("div", { class: "parley-choices" });
  values.forEach((value, i) => {
    const button = el("button", { type: "button", class: "parley-choice", text: labels[i] });
    button.addEventListener("click", () => submit(value));
    group.append(button);
  });
  return group;
}

function field(name, schema, required, t, { labelledBy = null } = {}) {
  const id = `parley-field-${++counter}`;
  // A lone answer box is named by the question above it (shown once, not twice).
  const label = labelledBy ? null : el("label", { for: id, text: schema.title || name });
  let input;
  if (Array.isArray(schema.enum)) {
    input = el("select", { id, name });
    for (const value of schema.enum) input.append(el("option", { value: String(value), text: String(value) }));
  } else if (schema.type === "boolean") {
    input = el("input", { id, name, type: "checkbox" });
    return { node: el("div", { class: "parley-field parley-check" }, input, label), read: () => input.checked };
  } else if (schema.type === "number" || schema.type === "integer") {
    input = el("input", { id, name, type: "number", step: schema.type === "integer" ? "1" : "any" });
    if (typeof schema.minimum === "number") input.min = String(schema.minimum);
    if (typeof schema.maximum === "number") input.max = String(schema.maximum);
    if (schema.type === "integer") {
      // step=1 counts from the minimum: a fractional minimum alone would let fractions by
      input.addEventListener("input", () => {
        input.setCustomValidity(input.value === "" || Number.isInteger(input.valueAsNumber) ? "" : t("wholeNumber"));
      });
    }
  } else {
    input = el("input", { id, name, type: schema.format === "email" ? "email" : "text", autocomplete: "off" });
    if (schema.maxLength) input.setAttribute("maxlength", String(schema.maxLength));
  }
  if (required) input.required = true;
  if (labelledBy) input.setAttribute("aria-labelledby", labelledBy);
  const read = () => {
    // the number the browser validated ("1e3" is 1000; parseInt read it as 1)
    if (schema.type === "number" || schema.type === "integer") return input.value === "" ? undefined : input.valueAsNumber;
    if (Array.isArray(schema.enum)) return schema.enum[input.selectedIndex];
    return input.value;
  };
  return { node: el("div", { class: "parley-field" }, label, input), read };
}

/**
 * @param {object|null} schema  the hook's JSON Schema
 * @param {string} question  the prompt text (the accessible name of a lone text box)
 * @param {(payload: any) => void} submit
 * @param {(key: string) => string} t  the widget's strings
 * @param {string} questionId  the id of the element showing the question
 * @returns {HTMLElement}
 */
export function renderForm(schema, question, submit, t, questionId) {
  schema = schema || { type: "string" };
  if (Array.isArray(schema.enum)) {
    return choiceButtons(schema.enum, schema.enum.map(String), submit);
  }
  if (schema.type === "boolean") {
    return choiceButtons([true, false], [t("yes"), t("no")], submit);
  }
  const form = el("form", { class: "parley-form", novalidate: "" });
  let read;
  if (schema.type === "object" && schema.properties) {
    const required = new Set(schema.required || []);
    const fields = fieldOrder(schema).map((name) => [name, field(name, schema.properties[name], required.has(name), t)]);
    for (const [, f] of fields) form.append(f.node);
    read = () => {
      const out = {};
      for (const [name, f] of fields) {
        const value = f.read();
        if (value !== undefined && !(value === "" && !required.has(name))) out[name] = value;
      }
      return out;
    };
  } else {
    const f = field("answer", { ...schema, title: question || schema.title || t("yourAnswer") }, true, t, { labelledBy: questionId });
    form.append(f.node);
    read = f.read;
  }
  form.append(el("button", { type: "submit", class: "parley-submit", text: t("sendAnswer") }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    submit(read());
  });
  return form;
}

/** An answer said back as text: "Yes", "Ada", "Name: Ada · Plan: Pro". */
export function describeAnswer(schema, payload, t) {
  if (payload === true) return t("yes");
  if (payload === false) return t("no");
  if (payload === null || payload === undefined) return "—";
  if (typeof payload !== "object") return String(payload);
  if (Array.isArray(payload)) return payload.map((item) => describeAnswer({}, item, t)).join(", ");
  const properties = (schema && schema.properties) || {};
  const known = schema && schema.properties ? fieldOrder(schema) : [];
  const names = [...known.filter((name) => name in payload), ...Object.keys(payload).filter((name) => !known.includes(name))];
  return names
    .map((name) => `${(properties[name] && properties[name].title) || name}: ${describeAnswer(properties[name] || {}, payload[name], t)}`)
    .join(" · ");
}
