// The strings the shared form code (schema-form.js) asks for, in English: passed as its
// `t` argument, so the console works with the widget's i18n'd version (the answer page
// speaks the visitor's language with the widget's own strings: i18n.js).
const STRINGS = {
  yes: "Yes", no: "No", sendAnswer: "Send answer", yourAnswer: "Your answer", wholeNumber: "Enter a whole number.",
};

export function t(key) {
  return STRINGS[key] ?? key;
}
